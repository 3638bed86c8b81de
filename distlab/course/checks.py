"""Deprecated: distlab.lessons.questions."""

from . import alias

alias(__name__, "distlab.lessons.questions")
