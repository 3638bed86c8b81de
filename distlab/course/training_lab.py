"""Deprecated: distlab.lessons.training_lab."""

from . import alias

alias(__name__, "distlab.lessons.training_lab")
