"""Grading infrastructure: the exercise builder and the sandboxed autograder (the question types that
lessons declare live in distlab.lessons.questions, one layer down).

    build        exercises/ from solutions/ (nbgrader's solution markers)
    discover     which lesson a notebook is, from the manifest distlab.lessons.LESSONS
    submission   reading a submitted notebook leniently
    beneath      reaching what lies below a folder given without following a link on the way
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

Importing this package imports none of them; it only marks jsonschema's slow optional import (UNUSED_SLOW_IMPORT)
absent in this process, before any of them imports nbformat. What each mode (bubblewrap, container, trusted) guarantees against
a hostile notebook, and what not: instructor/grading-threat-model.md (the threat model).
"""

import sys

__all__ = []

#: An optional module jsonschema imports for its "iri" format checks, building 38 grammars on import: 1.1 s of CPU
#: in every process that imports nbformat (the grader, the autograder's two phases, exercises, a test's grading
#: process), where nbformat's schemas check no format at all (python-jsonschema/jsonschema issue 1428). distlab's
#: commands (distlab.cli) and every process that imports this package do without it: importing it raises ImportError.
UNUSED_SLOW_IMPORT = "rfc3987_syntax"
sys.modules.setdefault(UNUSED_SLOW_IMPORT, None)  # type: ignore[arg-type]  # import now raises ImportError
