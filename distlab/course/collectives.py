"""Deprecated: distlab.lessons.collectives."""

from . import alias

alias(__name__, "distlab.lessons.collectives")
