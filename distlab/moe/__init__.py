"""Mixture-of-experts models and expert parallelism (Lesson 10).

    catalog   MoEModel, MOE_MODELS, model(): shapes, total and active parameter counts, sources
"""

from __future__ import annotations

from .catalog import ATTENTION_KINDS, MOE_MODELS, MoEModel, model

__all__ = ["ATTENTION_KINDS", "MOE_MODELS", "MoEModel", "model"]
