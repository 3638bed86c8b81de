"""Deprecated: the course tools moved. Lesson content is in distlab.lessons, grading machinery in distlab.grading.

    distlab.course.<lesson>   -> distlab.lessons.<lesson>   (data_parallel -> data_parallel_zero)
    distlab.course.checks     -> distlab.lessons.questions
    distlab.course.build      -> distlab.grading.build
    distlab.course.grade      -> distlab.grading.grade (with discover, answers, kernel, report)

The old modules still import (notebooks submitted before the move must keep grading); each is
the new module itself, and importing it warns with a DeprecationWarning (each alias file calls
distlab._arguments.renamed_module, as the renamed widget and plot modules do).
"""

__all__ = []
