"""Deprecated: distlab.lessons.collectives."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.collectives")
