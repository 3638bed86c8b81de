"""Deprecated: distlab.grading.build."""

from . import alias

alias(__name__, "distlab.grading.build")
