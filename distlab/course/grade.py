"""Deprecated: distlab.grading (grade, discover, answers, kernel, report, submission). The old names, re-exported."""

import warnings

from ..grading.answers import (
    ANSWER_PREFIX,
    MAX_ANSWER_CHARS,
    OpaqueAnswer,
    check_answers,  # noqa: F401
    parse_answers,
)
from ..grading.discover import identify_lesson, lesson_names, lesson_questions, lessons  # noqa: F401
from ..grading.grade import (
    DEFAULT_CELL_TIMEOUT,
    DEFAULT_FILE_SIZE_LIMIT,
    DEFAULT_MEMORY_LIMIT,  # noqa: F401
    DEFAULT_TIMEOUT,
    SANDBOXES,
    grade_notebook,
    grade_notebooks,
)
from ..grading.kernel import MAX_OUTPUT_CHARS, bwrap_available  # noqa: F401
from ..grading.report import AUDIT_ONLY_WARNING, GradeReport, NotebookGrade, QuestionGrade  # noqa: F401

warnings.warn(
    "distlab.course.grade is deprecated; import distlab.grading.grade (and its sibling modules)",
    DeprecationWarning,
    stacklevel=2,
)
