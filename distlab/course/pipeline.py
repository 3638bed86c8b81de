"""Deprecated: distlab.lessons.pipeline."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.pipeline")
