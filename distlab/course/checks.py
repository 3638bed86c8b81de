"""Deprecated: distlab.grading.questions."""

from . import alias

alias(__name__, "distlab.grading.questions")
