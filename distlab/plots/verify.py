"""Deprecated: distlab.plots.verify_with_pytorch (the lesson's slug names the module in every layer)."""

from .._arguments import renamed_module

renamed_module(__name__, "distlab.plots.verify_with_pytorch")
