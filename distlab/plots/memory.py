"""Deprecated: distlab.plots.memory_wall (the lesson's slug names the module in every layer)."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.plots.memory_wall")
