"""Deprecated: distlab.plots.data_parallel_zero (the lesson's slug names the module in every layer)."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.plots.data_parallel_zero")
