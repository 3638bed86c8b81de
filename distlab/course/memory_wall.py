"""Deprecated: distlab.lessons.memory_wall."""

from . import alias

alias(__name__, "distlab.lessons.memory_wall")
