"""Deprecated: the course tools moved. Lesson content is in distlab.lessons, grading machinery in distlab.grading.

    distlab.course.<lesson>   -> distlab.lessons.<lesson>   (data_parallel -> data_parallel_zero)
    distlab.course.checks     -> distlab.lessons.questions
    distlab.course.build      -> distlab.grading.build
    distlab.course.grade      -> distlab.grading.grade (with discover, answers, kernel, report)

The old modules still import (notebooks submitted before the move must keep grading); each is
the new module itself, and importing it warns with a DeprecationWarning.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make module `old` the module `new` (the same object, so patching one patches both), with a warning."""
    warnings.warn(f"{old} is deprecated; import {new}", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
