"""The planner's partial-layer recomputation search: plan(partial_recompute=True) prices every candidate with
recompute='full' that fits with every layer recomputed at the fewest layers N per model chunk that still fit
(distlab.partial_recompute: Megatron-LM's `--recompute-method block --recompute-num-layers N`, the same N on every
pipeline stage and chunk). Lesson 7 §1, §5.

Why the fewest: the memory per GPU falls as N grows (each recomputed layer keeps only its input instead of its
activations) and the step time rises (each recomputed layer runs its forward again), so among the N that fit the
smallest is the fastest. Both trends are tested (tests/core/test_plan_partial_recompute.py), not assumed here: the
search below only relies on the memory falling, found by a bisection over N on all candidate rows at once, each probe
pricing the activations alone (the weights, gradients and optimizer states do not depend on N).
"""

from __future__ import annotations

import numpy as np

from ._arguments import broadcasting
from .partial_recompute import chunk_layers
from .step import step_config, step_model_array
from .step.footprint import activations_term

__all__ = ["NOT_PARTIAL", "chunk_layers", "fewest_recomputed_layers"]

#: recompute_layers of a row that is not partial (recompute not 'full', or every layer of it recomputed): None
NOT_PARTIAL = -1


def fewest_recomputed_layers(model, keywords: dict, out: dict, usable: float) -> tuple[dict, np.ndarray]:
    """(results, recompute_layers) of plan(partial_recompute=True): `out` (step_model_array(model, **keywords) of
    the planner's columns) with each row whose recompute_code is 2 ('full') and whose memory fits `usable` bytes
    repriced at the smallest N (1 to chunk_layers) whose memory still fits; recompute_layers holds that N, or
    NOT_PARTIAL where the row is not repriced (not 'full', not fitting even with every layer recomputed, or needing
    every layer; every row of an MoE model, whose keywords hold ep: partial recomputation is modelled for dense models
    only). N starts at 1: N = 0 recomputes nothing, the same configuration as the layout's 'none' row (the
    same time and memory to the last bit), which the plan already holds. The default results are left as they are
    (a new dict, arrays copied where rows change).

    Llama 2 7B on one DGX H100, dp 8 with ZeRO-3, one 4,096-token sequence per GPU: 14.6 GB per GPU with every
    layer recomputed, 65.1 GB with none; each layer recomputed saves 1.58 GB, so 60 GB needs 4 of the 32 layers.

    >>> from distlab import hardware, memory, models, training
    >>> hw = training.hardware_arguments(hardware.cluster('dgx-h100', 1), memory.precision_recipe('mixed'))
    >>> kw = dict(hw, global_batch=8, seq_len=4096, dp=np.array([8, 8]), tp=1, pp=1, chunks=1, micro_batch_size=1,
    ...           zero=3, recompute_code=np.array([1, 2]), sequence_parallel=False, schedule_code=1, efficiency=0.5)
    >>> out = step_model_array(models.model('llama2-7b'), **kw)
    >>> new, n = fewest_recomputed_layers(models.model('llama2-7b'), kw, out, 60e9)
    >>> n.tolist(), round(float(new['memory_bytes'][1]) / 1e9, 1), bool(new['step_time_s'][1] < out['step_time_s'][1])
    ([-1, 4], 58.8, True)
    >>> fewest_recomputed_layers(models.model('llama2-7b'), kw, out, 80e9)[1].tolist()  # 'none' fits: N = 1
    [-1, 1]
    """
    size = np.asarray(keywords["recompute_code"]).size
    code = np.broadcast_to(keywords["recompute_code"], (size,))
    rows = np.flatnonzero((code == 2) & (np.broadcast_to(out["memory_bytes"], (size,)) <= usable))
    layers = np.full(size, NOT_PARTIAL, dtype=np.int64)
    if rows.size == 0 or "ep" in keywords:
        return out, layers
    sub = _rows(keywords, rows, size)
    top = np.broadcast_to(chunk_layers(model.layers, sub["pp"], sub["chunks"]), rows.shape)
    state = sum_state(out, rows, size)
    # N = 0 is the layout's 'none' row; hi fits (every layer recomputed); the answer lies in [lo, hi]
    lo, hi = np.ones_like(top), top.copy()
    while True:
        active = np.flatnonzero(lo < hi)
        if active.size == 0:
            break
        mid = (lo[active] + hi[active]) // 2
        fit = _memory(model, _rows(sub, active, rows.size), mid) + state[active] <= usable
        hi[active] = np.where(fit, mid, hi[active])
        lo[active] = np.where(fit, lo[active], mid + 1)
    partial = np.flatnonzero(hi < top)
    if partial.size == 0:
        return out, layers
    changed = rows[partial]
    new = step_model_array(model, **_rows(sub, partial, rows.size), recompute_layers=hi[partial])
    assert np.all(new["memory_bytes"] <= usable), "the bisection's memory differs from the step model's"
    layers[changed] = hi[partial]
    merged = {}
    for key, value in out.items():
        merged[key] = np.array(np.broadcast_to(value, (size,)), dtype=float)
        merged[key][changed] = np.broadcast_to(new[key], (partial.size,))
    return merged, layers


def sum_state(out: dict, rows: np.ndarray, size: int) -> np.ndarray:
    """weights + gradients + optimizer bytes of the rows, summed in step_model_array's order (its memory_bytes adds
    the activations last), so the bisection's memory is the step model's to the last bit."""
    w, g, o = (np.broadcast_to(out[k], (size,))[rows] for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes"))
    return w + g + o


@broadcasting
def _memory(model, keywords: dict, n: np.ndarray) -> np.ndarray:
    """The activation bytes per GPU of the configurations `keywords` with N = n layers of each chunk recomputed."""
    return activations_term(step_config(model, **keywords, recompute_layers=n), {})["activations_bytes"]


def _rows(keywords: dict, rows: np.ndarray, size: int) -> dict:
    """The keywords of the rows `rows`: every per-row array (a column of `size` entries) taken at rows, the rest as
    they are (numbers, the memory recipe, the compute model's tables)."""
    return {
        key: value[rows] if isinstance(value, np.ndarray) and value.ndim == 1 and value.size == size else value
        for key, value in keywords.items()
    }
