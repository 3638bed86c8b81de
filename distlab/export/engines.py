"""The engines distlab exports to, the memory recipes each runs, and what every exporter shares (distlab.export).

ENGINE_RECIPES: the memory-recipe families of each engine (distlab.memory_recipes), which `distlab export` plans and
checks a configuration with; config_of, launch and even_chunks: the StepEstimate record, a torchrun launch, and the
equal virtual stages the engines' layer-count flags express. Lesson 7 §7.
"""

from __future__ import annotations

from ..errors import ConfigurationError
from ..mesh import MAX_WORLD_SIZE
from ..units import positive_int

__all__ = [
    "FORMATS",
    "ENGINE_RECIPES",
    "engine_recipes",
    "engine_recipe",
    "config_of",
    "launch",
    "even_chunks",
    "refuse_activation_offload",
]

FORMATS = ("megatron", "deepspeed", "torchtitan")


#: Engine -> its memory-recipe families (distlab.memory_recipes), each {ZeRO stage: recipe}: the bytes the
#: engine really keeps, which export plans and checks a configuration with. The first family is the engine's
#: default: Megatron-LM keeps fp32 main gradients with --bf16; its second family is --grad-reduce-in-bf16, as
#: NVIDIA's performance recipes run. Lesson 7 §7.
ENGINE_RECIPES = {
    "megatron": (
        {0: "megatron", 1: "megatron-distributed-optimizer", 2: "megatron-fsdp", 3: "megatron-fsdp"},
        {0: "megatron-bf16-grads", 1: "megatron-distributed-optimizer-bf16-grads"},
    ),
    "deepspeed": ({0: "deepspeed", 1: "deepspeed", 2: "deepspeed", 3: "deepspeed"},),
    "torchtitan": ({0: "fsdp2", 2: "fsdp2", 3: "fsdp2"},),
}


def _engine_family(fmt, memory_recipe=None) -> dict:
    key = str(fmt).strip().lower()
    if key not in ENGINE_RECIPES:
        raise ConfigurationError(f"format={fmt!r}; valid: {', '.join(FORMATS)}")
    families = ENGINE_RECIPES[key]
    name = getattr(memory_recipe, "name", memory_recipe)
    if name is None or str(name).strip().lower() == "zero-paper":
        return families[0]
    name = str(name).strip().lower()
    for family in families:
        if name in family.values():
            return family
    valid = sorted({r for family in families for r in family.values()})
    raise ConfigurationError(
        f"memory_recipe={name!r} is not what {key} keeps per parameter; valid for {key}: {', '.join(valid)} "
        "(or leave it out: the engine's default)"
    )


def engine_recipes(fmt, memory_recipe=None) -> tuple:
    """The memory recipes engine `fmt` runs (one family: memory_recipe's, else the engine's default), in ZeRO
    order, each once: what `distlab export --best` plans with. memory_recipe None or 'zero-paper' (the
    teaching count) means the engine's default. Lesson 7 §7.

    >>> engine_recipes('megatron')
    ('megatron', 'megatron-distributed-optimizer', 'megatron-fsdp')
    >>> engine_recipes('megatron', 'megatron-bf16-grads')
    ('megatron-bf16-grads', 'megatron-distributed-optimizer-bf16-grads')
    """
    family = _engine_family(fmt, memory_recipe)
    return tuple(dict.fromkeys(family[z] for z in sorted(family)))


def engine_recipe(fmt, zero, memory_recipe=None) -> str:
    """The memory recipe engine `fmt` keeps at ZeRO stage `zero` (of memory_recipe's family, else the default
    family): what a configuration exported to it must fit with. Lesson 7 §7.

    >>> engine_recipe('megatron', 1)
    'megatron-distributed-optimizer'
    >>> engine_recipe('torchtitan', 1)
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: zero=1: torchtitan runs ZeRO stages 0, 2, 3 ...
    """
    family = _engine_family(fmt, memory_recipe)
    if zero not in family:
        stages = ", ".join(str(z) for z in sorted(family))
        raise ConfigurationError(
            f"zero={zero}: {str(fmt).strip().lower()} runs ZeRO stages {stages} with memory recipe "
            f"{family[min(family)]!r} and its family"
        )
    return family[zero]


def config_of(estimate) -> dict:
    """The configuration record of a distlab.training.StepEstimate (our error for anything else)."""
    config = getattr(estimate, "config", None)
    if not isinstance(config, dict):
        raise ConfigurationError(f"export needs a distlab.training.StepEstimate, got {type(estimate).__name__}")
    return config


def launch(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, processes per node) of a torchrun launch of `gpus` GPUs."""
    gpus_per_node = positive_int(gpus_per_node, "gpus_per_node", high=MAX_WORLD_SIZE)
    if gpus <= gpus_per_node:
        return 1, gpus
    if gpus % gpus_per_node:
        raise ConfigurationError(f"{gpus} GPUs do not fill whole nodes of {gpus_per_node}")
    return gpus // gpus_per_node, gpus_per_node


def even_chunks(c, model, engine):
    """Our error for interleaving with uneven chunks, which the engines' layer-count flags do not express."""
    if c["schedule"] == "interleaved" and model.layers % (c["pp"] * c["chunks"]):
        raise ConfigurationError(
            f"{model.layers} layers do not split into pp x chunks = {c['pp'] * c['chunks']} "
            f"equal chunks; {engine}'s export writes equal virtual stages: choose chunks "
            f"dividing {model.layers} / pp"
        )


def refuse_activation_offload(c: dict, engine: str) -> None:
    """ConfigurationError where a configuration record offloads activations (estimate's activation_offload_layers
    N > 0) and the engine has no such knob distlab can write: only Megatron-LM's --cpu-offloading-num-layers
    (distlab.step.offload). Lesson 7 §7.

    >>> refuse_activation_offload({'activation_offload_layers': 0}, 'deepspeed')
    """
    n = c.get("activation_offload_layers", 0)
    if n:
        raise ConfigurationError(
            f"activation_offload_layers={n}: {engine} has no activation-offloading knob distlab exports (valid: "
            "activation_offload_layers=0 here); export to megatron (--cpu-offloading-num-layers)"
        )
