"""distlab: learn distributed training of large models by computing it.

Submodules load on first use so that `import distlab` stays light:

    >>> import distlab
    >>> distlab.memory.training_memory("llama2-7b", gpu="h100-sxm").total  # doctest: +SKIP
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "errors",
    "units",
    "hardware",
    "models",
    "memory",
    "flops",
    "collectives",
    "dataparallel",
    "fsdp",
    "failures",
    "batch",
    "pipeline",
    "tensor",
    "mesh",
    "moe",
    "step_parts",
    "step",
    "training",
    "triage",
    "planner",
    "validation",
    "calibration",
    "production",
    "verify",
    "plots",
    "widgets",
    "lessons",
    "grading",
    "course",
    "cli",
)

__all__ = list(_SUBMODULES)


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'distlab' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES))
