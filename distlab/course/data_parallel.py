"""Deprecated: distlab.lessons.data_parallel_zero."""

from . import alias

alias(__name__, "distlab.lessons.data_parallel_zero")
