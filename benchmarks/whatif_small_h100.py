"""What-ifs behind RESULTS.md's 2026-11-29 section on the small H100 runs (issue 30): each candidate cause priced by
patching the shipped step model for one run, the calibration unchanged. Nothing here ships. Prints the signed error
(%) of the worst runs and the validation mean / max |error| for each row.

Rows 7-9 have since shipped (RESULTS.md, "FSDP's gradient path and llm-foundry's unpadding priced as the engines run
them": memory recipes fsdp1 / fsdp2, attention kernel fa2-unpad). On that code this script's rows 7-9 count them a
second time; reproduce them at commit 798ae5f.

    python benchmarks/whatif_small_h100.py [--xla PATH]

--xla: a copy of openxla's xla/service/gpu/model/matmul_interpolator_data.h (kDefaultMatmulPTable; RESULTS.md names
the commit read). With it, row 1 prices every H100 GEMM at the table's measured sm_90 bf16 rate over the MAMF best
(794.5 TFLOP/s), trilinear in log2 of m, n, k, sides clamped to the table's 256-4096. Without it row 1 is skipped.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import re

import numpy as np

from distlab import efficiency, validation
from distlab.step import compute, data_parallel, terms
from distlab.step.config import step_config
from distlab.training import estimate

WORST = (
    "mpt-7b-h100_80gb-512gpu-seq2048-noac",
    "mpt-7b-h100_80gb-128gpu-seq2048-noac",
    "megatron-core-r0.8-h100-1.7b",
    "megatron-core-r0.8-h100-7.1b",
    "mpt-7b-h100_80gb-8gpu-seq8192-ac",
    "torchtitan-h100-8gpu-llama31-8b-compile",
    "torchtitan-h100-128gpu-llama31-8b-compile",
)
# llm-foundry's attn_impl per MPT run (sweep.py at 5e85bd62d, sweep.sh at b2a43a147; RESULTS.md): 'triton' where not FA2
FA2_MPT = {
    "mpt-7b-h100_80gb-512gpu-seq2048-noac",
    "mpt-7b-h100_80gb-128gpu-seq2048-noac",
    "mpt-70b-h100_80gb-512gpu-seq2048-ac",
    "mpt-70b-h100_80gb-128gpu-seq2048-ac",
}
UNPAD_BYTES_PER_H = 40.0  # llm-foundry's FA2 unpad / pad copies per token and layer, forward + backward (RESULTS.md)
FSDP1_GRAD_BYTES = 14.0  # FSDP1: cast bf16 -> fp32 (2 + 4) and in-place pre-divide (4 + 4) per parameter and microbatch
FSDP2_GRAD_BYTES = 6.0  # FSDP2: the copy into the fp32 reduce-scatter buffer only

_state = {"core": 1.0, "rs_fp32": False, "extra": None}
_core, _dp_term, _exposed, _shape = (
    compute.attention_core_seconds,
    data_parallel.dp_term,
    data_parallel.layer_by_layer_exposed,
    efficiency._shape_factor,
)


def _patched_core(c):
    return _state["core"] * _core(c)


def _patched_exposed(f, b, gather, reduce, layers, prefetch=1, reshard_after_forward=True):
    factor = 2.0 if _state["rs_fp32"] else 1.0
    return _exposed(
        f, b, gather, factor * reduce, layers, prefetch=prefetch, reshard_after_forward=reshard_after_forward
    )


def _patched_dp_term(c, r):
    """The reduce-scatter of an FSDP (fsdp2 recipe, ZeRO-3) step in fp32: each layer's reduce half counted twice."""
    fsdp = _state["rs_fp32"] and bool(np.all(np.asarray(c.zero) >= 3)) and c.memory_recipe.name == "fsdp2"
    saved, _state["rs_fp32"] = _state["rs_fp32"], fsdp
    out = _dp_term(c, r)
    _state["rs_fp32"] = saved
    if fsdp:
        layers = c.layers_stage
        total = out["dp_comm_s"] * (4.0 * layers - 1.0) / (3.0 * layers - 1.0)
        out["dp_comm_s"], out["dp_hidden_s"] = total, np.maximum(0.0, total - out["dp_exposed_s"])
    return out


compute.attention_core_seconds = _patched_core
data_parallel.layer_by_layer_exposed = _patched_exposed
terms.ORDER = tuple(_patched_dp_term if f is _dp_term else f for f in terms.ORDER)


def _xla_shape_factor(path):
    """A _shape_factor that reads H100 (132 SMs) GEMMs from XLA's sm_90 table (b 1, bf16), the others unchanged."""
    text = open(path).read()
    text = text[text.index('key: "sm_90"') :]
    table = {}
    pattern = r"entries \{\s*b: (\d+)\s*m: (\d+)\s*n: (\d+)\s*k: (\d+)(.*?)\n      \}"
    for entry in re.finditer(pattern, text, re.S):
        b, m, n, k = (int(x) for x in entry.groups()[:4])
        rate = re.search(r'key: "bf16xbf16->bf16" value: (\d+)', entry.group(5))
        if b == 1 and rate:
            table[(m, n, k)] = int(rate.group(1)) / 794.5e12
    sides = [sorted({key[i] for key in table}) for i in range(3)]
    grid = np.array([[[table[(a, b, c)] for c in sides[2]] for b in sides[1]] for a in sides[0]])
    logs = [np.log2(np.asarray(s, dtype=float)) for s in sides]

    def factor(m, n, k, sms, ridge):
        if sms != 132:
            return _shape(m, n, k, sms, ridge)
        values = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (m, n, k)))
        index, weight = [], []
        for value, g in zip(values, logs):
            x = np.clip(np.log2(value), g[0], g[-1])
            i = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
            index.append(i)
            weight.append((x - g[i]) / (g[i + 1] - g[i]))
        out = 0.0
        for corner in itertools.product((0, 1), repeat=3):
            w = np.prod([wt if up else 1.0 - wt for up, wt in zip(corner, weight)], axis=0)
            out = out + w * grid[index[0] + corner[0], index[1] + corner[1], index[2] + corner[2]]
        return np.minimum(out, 1.0)

    return factor


def _extra_seconds(run, est, grad, unpad):
    """FSDP's per-microbatch gradient cast / divide and llm-foundry's FA2 unpad / pad copies, at the HBM bandwidth."""
    mapping = run["distlab"]["estimate"]
    if mapping.get("memory_recipe") != "fsdp2" or mapping.get("zero") != 3:
        return 0.0
    model, keywords = est.step_inputs
    c = step_config(model, **keywords)
    seconds = 0.0
    if grad:
        per_parameter = FSDP1_GRAD_BYTES if run["id"].startswith("mpt") else FSDP2_GRAD_BYTES
        seconds += float(c.m) * per_parameter * model.parameter_count() / (float(c.tp) * float(c.pp)) / c.hbm
    if unpad and run["id"] in FA2_MPT:
        tokens = float(c.tokens_mb) * float(c.m) * float(c.layers_stage)
        seconds += UNPAD_BYTES_PER_H * model.hidden * efficiency.MEMORY_TRAFFIC * tokens / c.hbm
    return seconds


def row(core=None, kernels=None, attention_kernel=None, rs_fp32=False, grad=False, unpad=False):
    """Signed error (%) per validation run under one what-if. core: (run ids, attention-core multiplier)."""
    errors = {}
    _state["rs_fp32"] = rs_fp32
    for run in validation.load_runs("validation"):
        if not run["distlab"]["expressible"]:
            continue
        mapping = copy.deepcopy(run["distlab"]["estimate"])
        _state["core"] = core[1] if core and run["id"] in core[0] else 1.0
        if kernels and run["id"].startswith("mpt"):
            mapping["kernels"] = kernels
        if attention_kernel and run["id"].startswith("megatron-core"):
            mapping["attention_kernel"] = attention_kernel
        est = estimate(validation.run_model(run), validation.run_cluster(run), **mapping)
        seconds = est.step_time_s + _extra_seconds(run, est, grad, unpad)
        errors[run["id"]] = 100.0 * (seconds / validation.measured_step_time(run) - 1.0)
    _state.update(core=1.0, rs_fp32=False)
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xla", help="path to XLA's matmul_interpolator_data.h (row 1)")
    args = parser.parse_args()
    triton = {r["id"] for r in validation.load_runs("validation") if r["id"].startswith("mpt")} - FA2_MPT
    mcore = {r["id"] for r in validation.load_runs("validation") if r["id"].startswith("megatron-core")}
    rows = [("0 shipped", {})]
    if args.xla:
        rows.append(("1 XLA sm_90 GEMM rates", "xla"))
    rows += [
        ("2 Triton attention 1.3x slower", dict(core=(triton, 1.3))),
        ("3 Triton attention 2.5x slower", dict(core=(triton, 2.5))),
        ("4 Megatron-Core on fa2", dict(attention_kernel="fa2")),
        ("5 Megatron-Core attention 1.25x", dict(core=(mcore, 1.25))),
        ("6 MPT eager kernels", dict(kernels="eager")),
        ("7 FSDP reduce-scatter fp32", dict(rs_fp32=True)),
        ("8 7 + gradient cast / divide", dict(rs_fp32=True, grad=True)),
        ("9 8 + FA2 unpad / pad", dict(rs_fp32=True, grad=True, unpad=True)),
    ]
    labels = ("mpt7b 512", "mpt7b 128", "mcore 1.7B", "mcore 7.1B", "mpt7b s8192", "tt8b c 8", "tt8b c 128")
    print("columns: " + ", ".join(WORST) + "; then validation mean and max |error|")
    print("row".ljust(34) + "".join(label.rjust(12) for label in labels) + "   mean    max")
    for name, what in rows:
        if what == "xla":
            efficiency._shape_factor = _xla_shape_factor(args.xla)
            errors = row()
            efficiency._shape_factor = _shape
        else:
            errors = row(**what)
        size = np.abs(np.array(list(errors.values())))
        cells = "".join(f"{errors[w]:+12.1f}" for w in WORST)
        print(f"{name:34s}{cells}  {size.mean():5.2f}  {size.max():5.1f}")


if __name__ == "__main__":
    main()
