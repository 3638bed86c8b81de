"""Deprecated: distlab.lessons.production."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.production")
