"""A configuration as the input of a real training engine: Megatron-LM, DeepSpeed or torchtitan.

Each exporter takes a distlab.training.StepEstimate (so the configuration has been validated
and priced) and writes what the engine reads; each output parses back (shlex / json / tomllib)
to the same degrees, batch sizes and model shape, which tests/core/test_export.py checks. A setting
an engine cannot express raises ConfigurationError naming the engines that can. Lesson 7 §7.

One module per engine: megatron_lm (a torchrun line of pretrain_gpt.py flags, and parse_megatron reading it back),
deepspeed_json (the DeepSpeed config JSON), torchtitan_toml (the JobConfig TOML); engines holds the engines' memory
recipes (ENGINE_RECIPES) and what the exporters share. Each module's docstring cites the engine version and the
source of every flag or key it writes. Every public name is importable from distlab.export.
"""

from __future__ import annotations

from ..errors import ConfigurationError
from .deepspeed_json import deepspeed, deepspeed_config
from .engines import ENGINE_RECIPES, FORMATS, engine_recipe, engine_recipes
from .megatron_lm import (
    MAX_COMMAND_CHARS,
    MEGATRON_BF16_GRADS,
    MEGATRON_FSDP_STRATEGIES,
    MEGATRON_ROPE_SCALING_FIXED,
    megatron,
    megatron_dp_overlap_flags,
    megatron_flags,
    parse_megatron,
)
from .torchtitan_toml import TORCHTITAN_FLAVORS, TORCHTITAN_ROPE, TORCHTITAN_SCHEDULES, torchtitan

__all__ = [
    "FORMATS",
    "TORCHTITAN_SCHEDULES",
    "TORCHTITAN_FLAVORS",
    "MEGATRON_FSDP_STRATEGIES",
    "MEGATRON_ROPE_SCALING_FIXED",
    "TORCHTITAN_ROPE",
    "ENGINE_RECIPES",
    "engine_recipe",
    "engine_recipes",
    "megatron_flags",
    "megatron_dp_overlap_flags",
    "megatron",
    "parse_megatron",
    "deepspeed_config",
    "deepspeed",
    "torchtitan",
    "export",
]


def export(estimate, fmt: str, gpus_per_node: int = 8) -> str:
    """The configuration in engine format `fmt`: 'megatron', 'deepspeed' or 'torchtitan'.

    Lesson 7 §7 (`distlab export`).

    >>> from distlab import training
    >>> est = training.estimate('llama2-7b', 'dgx-h100', nodes=2, global_batch=64, tp=2, pp=2, zero=1)
    >>> export(est, 'torchtitan')
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: zero=1: torchtitan shards with FSDP2, ...
    """
    key = str(fmt).strip().lower()
    if key == "megatron":
        return megatron(estimate, gpus_per_node)
    if key == "deepspeed":
        return deepspeed(estimate)
    if key == "torchtitan":
        return torchtitan(estimate)
    raise ConfigurationError(f"format={fmt!r}; valid: {', '.join(FORMATS)}")
