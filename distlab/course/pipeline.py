"""Deprecated: distlab.lessons.pipeline."""

from . import alias

alias(__name__, "distlab.lessons.pipeline")
