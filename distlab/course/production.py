"""Deprecated: distlab.lessons.production."""

from . import alias

alias(__name__, "distlab.lessons.production")
