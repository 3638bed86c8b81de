"""Grading infrastructure: the exercise builder and the sandboxed autograder (the question types that
lessons declare live in distlab.lessons.questions, one layer down).

    build        exercises/ from solutions/ (nbgrader's solution markers)
    discover     which lesson a notebook is, from the manifest distlab.lessons.LESSONS
    submission   reading a submitted notebook leniently
    kernel_side  the sandbox and the answer collector, run inside the student's kernel
    kernel       bubblewrap, the kernel manager, running the cells
    messages     reading the kernel's messages within bounds
    answers      decoding and checking the answers, in the grading process
    report       QuestionGrade, NotebookGrade, GradeReport (table, JSON, Gradescope)
    grade        grade_notebook / grade_notebooks: the orchestration
    variants     per-student variants: the roster, seeds signed with the instructor secret, one notebook each
    classroom    grading a class: the run (resumable, one kernel per student and lesson)
    class_submissions  which notebooks a class run grades, and whose (folders, Gradescope exports)
    journal      the class run's resumable journal (HMAC-signed records)
    class_results  results.csv/json, gradescope/, summary, histogram of a class run
    gradescope   the autograder zip Gradescope's containers run (setup.sh, run_autograder)

Importing this package imports none of them. What each mode (bubblewrap, container, trusted) guarantees against
a hostile notebook, and what not: instructor/grading-threat-model.md (the threat model).
"""

__all__ = []
