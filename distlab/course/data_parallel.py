"""Deprecated: distlab.lessons.data_parallel_zero."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.data_parallel_zero")
