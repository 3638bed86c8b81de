"""Deprecated: distlab.lessons.parallelism_3d."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.parallelism_3d")
