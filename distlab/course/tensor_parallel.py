"""Deprecated: distlab.lessons.tensor_parallel."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.tensor_parallel")
