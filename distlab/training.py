"""Training step time, FLOPs, MFU/HFU, throughput and scaling efficiency.

FLOPs follow Kaplan et al. 2020 / Narayanan et al. 2021: a training step costs 6 x params x
tokens (2 forward + 4 backward per parameter per token); full activation recomputation runs
the forward twice, 8 x params x tokens. MFU counts the model's FLOPs (6PT) against peak;
HFU counts what the hardware executes (8PT with full recomputation). Throughput = global
batch / step time.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigurationError
from .units import FLOP_PER_SECOND, SECONDS, positive, positive_int

#: Training FLOPs per parameter per token: forward 2, backward 4 (weight and input gradients).
FLOPS_PER_PARAM_TOKEN = 6.0
#: With full recomputation the forward runs again during backward: 2 + 2 + 4.
FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE = 8.0


def model_flops(params, tokens) -> float:
    """Model FLOPs of one training step: 6 x params x tokens (tokens = global batch x sequence length)."""
    return FLOPS_PER_PARAM_TOKEN * positive(params, "", "params") * positive(tokens, "", "tokens")


def hardware_flops(params, tokens, recompute="none") -> float:
    """FLOPs the GPUs execute: 6PT, or 8PT with full recomputation (selective recomputation of
    attention scores adds no parameter FLOPs in this model)."""
    from .memory import _recompute

    factor = FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE if _recompute(recompute) == "full" else FLOPS_PER_PARAM_TOKEN
    return factor * positive(params, "", "params") * positive(tokens, "", "tokens")


def megatron_flops_per_iteration(batch, seq_len, layers, hidden, vocab) -> float:
    """Narayanan et al. 2021, Eq. 3 (full recomputation, attention and logits included):
    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))."""
    b = positive_int(batch, "batch")
    s = positive_int(seq_len, "seq_len")
    l = positive_int(layers, "layers")
    h = positive_int(hidden, "hidden")
    v = positive_int(vocab, "vocab")
    return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def training_days(params, tokens, gpus, flops_per_gpu, recompute="full") -> float:
    """End-to-end training time in days: factor x T x P / (n X), factor 8 with full
    recomputation (Narayanan et al. 2021, Eq. 4), 6 without."""
    seconds = hardware_flops(params, tokens, recompute) / (
        positive_int(gpus, "gpus") * positive(flops_per_gpu, FLOP_PER_SECOND, "flops_per_gpu")
    )
    return seconds / 86400.0


def mfu(model_flops_per_step, step_time, gpus, peak_flops) -> float:
    """Model FLOPs utilisation = model FLOPs / (step time x GPUs x peak FLOP/s per GPU)."""
    value = positive(model_flops_per_step, "FLOP", "model_flops") / (
        positive(step_time, SECONDS, "step_time") * positive_int(gpus, "gpus")
        * positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    )
    return value


def mfu_array(model_flops_per_step, step_time, gpus, peak_flops):
    """mfu on NumPy arrays, unvalidated (planner fast path)."""
    return np.asarray(model_flops_per_step) / (np.asarray(step_time) * np.asarray(gpus) * peak_flops)


def check_fraction(value, name: str) -> float:
    """A fraction in (0, 1], such as an achievable share of peak."""
    number = positive(value, "", name)
    if number > 1:
        raise ConfigurationError(f"{name}={number:g} must be a fraction in (0, 1] (e.g. 0.5 for 50% of peak)")
    return number
