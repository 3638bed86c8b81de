"""Deprecated: distlab.grading.build."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.grading.build")
