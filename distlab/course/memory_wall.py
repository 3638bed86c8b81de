"""Deprecated: distlab.lessons.memory_wall."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.memory_wall")
