"""Deprecated: distlab.lessons.training_lab."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.lessons.training_lab")
