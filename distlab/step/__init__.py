"""The step model: one training step's time, by named terms, and its memory per GPU (Lesson 7 §1).

    config.py         StepConfig: one configuration, or the planner's columns, as NumPy arrays, checked once
    terms.py          TERMS, the step time's parts (key, label, colour, assumption, function), and step_model_array,
                      their composition
    compute.py        compute by part (matmuls, attention core, element-wise traffic), overlap slowdown, optimizer
    communication.py  TP, CP (ring attention), EP all-to-all, pipeline bubble and p2p
    data_parallel.py  DP / ZeRO / FSDP traffic, in total and exposed
    footprint.py      weights, gradients, optimizer states and activations per GPU
    placement.py      where traffic runs: a placed group's all-reduce, equal local ranks, pipeline crossings
    offload.py        activation offloading to host memory (Megatron-Core --cpu-offloading-num-layers): memory, copies
    experts.py        training.estimate's view of a model: an MoE model's with its expert parallelism checked

training.estimate and the planner call step_model_array; the terms call the topic modules (flops, efficiency,
tensor, pipeline, dataparallel, fsdp, memory, moe), which hold the formulas.
"""

from __future__ import annotations

from .config import StepConfig, step_config
from .terms import TERMS, Term, step_model_array, term

__all__ = ["StepConfig", "step_config", "Term", "TERMS", "term", "step_model_array"]
