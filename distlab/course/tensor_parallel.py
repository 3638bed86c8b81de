"""Deprecated: distlab.lessons.tensor_parallel."""

from . import alias

alias(__name__, "distlab.lessons.tensor_parallel")
