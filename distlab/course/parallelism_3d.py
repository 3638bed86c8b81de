"""Deprecated: distlab.lessons.parallelism_3d."""

from . import alias

alias(__name__, "distlab.lessons.parallelism_3d")
