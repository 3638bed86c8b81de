"""Routing capacity of mixture-of-experts layers: expert capacity, dropped tokens, load imbalance.

Routing (Shazeer et al. 2017; GShard, Lepikhin et al. 2021, Sec. 2.2; Switch Transformer, Fedus et al.
2022, Sec. 2.2): each token goes to its top_k experts; an expert accepts at most its capacity

    C = ceil(capacity_factor x T x k / E)     T tokens routed together, E experts

and tokens over capacity are dropped (they skip the expert through the residual). Dropless training
(capacity_factor None) keeps every token, and then the busiest expert sets the layer's time.

Also the input bounds every MoE formula accepts (MAX_*). Lesson 10 §3.
"""

from __future__ import annotations

import math

import numpy as np

from .._arguments import divisors, number_array, short_list, whole_number
from ..errors import ConfigurationError

__all__ = ["expert_capacity", "dropped_tokens", "imbalance_factor", "busiest_expert_load"]

#: Largest sequence length and token count the formulas accept (results stay finite floats).
MAX_SEQ_LEN = 2**24
MAX_TOKENS = 2**40
#: Most experts per layer, and most GPUs in a group, the formulas accept.
MAX_EXPERTS = 2**16
MAX_GPUS = 2**22


def _fraction(value, name: str, low: float = 0.0, high: float = math.inf, low_open=False) -> float:
    ok = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(float(value) if abs(value) < 2**1000 else math.inf)
        and (value > low if low_open else value >= low)
        and value <= high
    )
    if not ok:
        bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if math.isfinite(high) else "")
        raise ConfigurationError(f"{name}={value!r} must be a number {bound}")
    return float(value)


def expert_capacity(tokens, experts, top_k, capacity_factor) -> int:
    """Tokens one expert accepts: ceil(capacity_factor x tokens x top_k / experts).

    GShard (Lepikhin et al. 2021) Sec. 2.2 and Switch Transformer (Fedus et al. 2022) Sec. 2.2, with the
    top-k copies counted as Megatron-Core's capacity does. Lesson 10 §3.

    >>> expert_capacity(4096, 8, 2, 1.25)  # Mixtral-like: 1024 copies per expert on average, 25 % slack
    1280
    """
    t = whole_number(tokens, "tokens", 1, MAX_TOKENS)
    e = whole_number(experts, "experts", 1, MAX_EXPERTS)
    k = whole_number(top_k, "top_k", 1, MAX_EXPERTS)
    if k > e:
        raise ConfigurationError(f"top_k={k} is more than the {e} experts; valid: 1 to {e}")
    cf = _fraction(capacity_factor, "capacity_factor", 0.0, 1e6, low_open=True)
    return max(1, math.ceil(cf * t * k / e - 1e-9))


#: The most token copies one expert may be given (far above any step's tokens, ~1e8): sums over 2^20 experts stay finite.
MAX_LOAD = 1e15


def _loads(loads, name: str = "loads") -> np.ndarray:
    array = None
    if not isinstance(loads, (str, bytes, dict)) and (not hasattr(loads, "__len__") or len(loads) <= 2**20):
        try:
            array = np.asarray(loads, dtype=float)
        except (ValueError, TypeError):
            array = None
    if (
        array is None
        or array.ndim != 1
        or array.size == 0
        or not np.all(np.isfinite(array))
        or np.any(array < 0)
        or np.any(array > MAX_LOAD)
        or array.size > 2**20
    ):
        raise ConfigurationError(
            f"{name} must be a 1-D sequence of 1 to {2**20:,} token counts from 0 to {MAX_LOAD:.0e} per expert"
        )
    return array


def dropped_tokens(loads, capacity) -> float:
    """Token copies dropped when each expert accepts at most `capacity`: sum of max(0, load - capacity).

    Switch Transformer Sec. 2.2 ("overflowed tokens ... passed to the next layer through the residual").
    Lesson 10 §3.

    >>> dropped_tokens([1500, 900, 700, 1000], capacity=1280)
    220.0
    """
    array = _loads(loads)
    c = _fraction(capacity, "capacity", 0.0)
    return float(np.maximum(array - c, 0.0).sum())


def imbalance_factor(loads, ep=1) -> float:
    """Busiest GPU's token copies over the mean: max_g(sum of its experts' loads) / mean.

    Experts are laid out contiguously (GPU g of the EP group holds experts g E/ep .. (g+1) E/ep - 1, as
    Megatron-Core does); the expert GEMMs take as long as the busiest GPU's, so the MoE MLP's time is
    this factor times the balanced time. ep = number of experts gives the busiest expert. Lesson 10 §3.

    >>> imbalance_factor([1500, 900, 700, 1000], ep=4)  # 1500 / 1025
    1.4634146341463414
    >>> imbalance_factor([1500, 900, 700, 1000], ep=2)  # GPU 0: 2400 of 4100
    1.170731707317073
    """
    array = _loads(loads)
    ep = _ep_divides(ep, array.size)
    per_gpu = array.reshape(ep, -1).sum(axis=1)
    mean = per_gpu.mean()
    return float(per_gpu.max() / mean) if mean > 0 else 1.0


def busiest_expert_load(imbalance, capacity_factor, ep, experts, top_k):
    """Token copies the busiest GPU's experts process, over the balanced T k: what sets an MoE layer's expert time.

    With a capacity factor c (GShard's fixed-size expert buffers, Lepikhin et al. 2021, Sec. 2.2) every expert's
    buffer is padded to its capacity and the overflow dropped, so every GPU, the busiest too, computes exactly c
    times the balanced work, whatever the router's skew: c (not the busiest GPU's kept copies over the mean of the
    kept copies, which counts the padding as free). Dropless: the imbalance (busiest GPU's copies over the mean,
    imbalance_factor or the routing simulation), at most min(ep, E / k) (with ep = 1 one GPU takes every copy).
    NumPy broadcast over ep. The step model (moe.step.MoEStepModel.expert_load) and the capacity app call it. Lesson 10 §3.

    >>> busiest_expert_load(1.66, 1.25, 8, 8, 2), busiest_expert_load(1.66, None, [1, 8], 8, 2).tolist()
    (1.25, [1.0, 1.66])
    """
    ep = number_array(ep, "ep", low=1.0)
    if capacity_factor is not None:
        factor = _fraction(capacity_factor, "capacity_factor", 0.0, low_open=True)
        return np.full(ep.shape, factor) if ep.shape else factor
    ratio = whole_number(experts, "experts", 1, MAX_EXPERTS) / whole_number(top_k, "top_k", 1, MAX_EXPERTS)
    load = np.minimum(_fraction(imbalance, "imbalance", 1.0), np.minimum(ep, ratio))
    return load if np.ndim(load) else float(load)


def _ep_divides(ep, experts: int) -> int:
    ep = whole_number(ep, "ep", 1, MAX_GPUS)
    if experts % ep:
        raise ConfigurationError(
            f"ep={ep} does not divide the {experts} experts (each GPU holds experts/ep of "
            f"them); valid ep: {short_list(divisors(experts), 12)}"
        )
    return ep
