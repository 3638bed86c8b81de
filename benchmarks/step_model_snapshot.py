"""Snapshot of the step model's outputs, to show that a refactoring changes no number (issue 29).

    python benchmarks/step_model_snapshot.py dump before.json      # on the code before the change
    python benchmarks/step_model_snapshot.py dump after.json       # on the code after it
    python benchmarks/step_model_snapshot.py compare before.json after.json [--rtol 1e-9]

What it records:
- `distlab validate`: StepEstimate.to_dict() of every expressible published run (every role), as the CLI prices
  it (validation.predict: the calibrated model unless the run fixes an efficiency), and again with a fixed
  efficiency of 0.5 and with the calibration pair (0.7, 2.0) that fit_calibration's grid visits;
- lesson 7: the estimates of its fabric comparison and every column of its planner sweeps (Llama 3.1 70B on 32
  DGX H100 nodes, each fabric; FSDP2's recipe on NDR);
- a few configurations that reach the step model's other branches (MoE with EP, context parallelism, balanced
  stages, TP overlap, eager kernels, an engine's memory recipe, interleaving) and a small MoE plan.

compare exits 1 and lists every number that moved by more than rtol (relative) or changed type/shape.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def _plan(p) -> dict:
    return {
        "results": {k: np.asarray(v, dtype=float) for k, v in p.results.items()},
        "columns": {k: np.asarray(v) for k, v in p.columns.items()},
        "feasible": p.feasible,
        "order": p.order,
        "rejected": p.rejected,
        "top": p.top(5),
        "deciding": p.deciding_assumption(0, 1).text() if len(p) > 1 else None,
    }


EXTRA_ESTIMATES = {
    "mixtral-ep": (
        "mixtral-8x7b",
        "dgx-h100",
        dict(nodes=2, fabric="ib-ndr", global_batch=64, seq_len=4096, tp=2, ep=4, sequence_parallel=True, zero=1),
    ),
    "mixtral-capacity": (
        "mixtral-8x7b",
        "dgx-h100",
        dict(
            nodes=2,
            fabric="ib-ndr",
            global_batch=64,
            seq_len=4096,
            ep=8,
            capacity_factor=1.25,
            moe_imbalance=1.5,
            recompute="full",
            pp=2,
        ),
    ),
    "cp-ring": (
        "llama3.1-8b",
        "dgx-h100",
        dict(
            nodes=4,
            fabric="ib-ndr",
            global_batch=32,
            seq_len=32768,
            tp=4,
            cp=4,
            sequence_parallel=True,
            recompute="selective",
        ),
    ),
    "cp-fabric-full": (
        "llama3.1-8b",
        "dgx-h100",
        dict(nodes=4, fabric="ethernet-100g", global_batch=32, seq_len=32768, tp=8, cp=4, recompute="full", zero=3),
    ),
    "balanced-interleaved": (
        "llama3.1-70b",
        "dgx-h100",
        dict(
            nodes=8,
            fabric="ib-ndr",
            global_batch=128,
            seq_len=8192,
            tp=8,
            pp=4,
            schedule="interleaved",
            chunks=2,
            balance_stages=True,
            zero=1,
            sequence_parallel=True,
            tp_overlap=True,
            memory_recipe="megatron-distributed-optimizer",
        ),
    ),
    "eager-zero2": (
        "llama2-7b",
        "dgx-a100",
        dict(
            nodes=2,
            fabric="ib-hdr",
            global_batch=64,
            seq_len=4096,
            zero=2,
            kernels="eager",
            attention="unfused",
            micro_batch_size=2,
        ),
    ),
    "fsdp2-zero3": (
        "llama2-13b",
        "dgx-h100",
        dict(
            nodes=4, fabric="ib-ndr", global_batch=128, seq_len=4096, zero=3, memory_recipe="fsdp2", micro_batch_size=2
        ),
    ),
    "gpipe-fixed": (
        "gpt3-175b",
        "dgx-a100",
        dict(
            nodes=16,
            fabric="ib-hdr",
            global_batch=256,
            seq_len=2048,
            tp=8,
            pp=8,
            schedule="gpipe",
            efficiency=0.45,
            recompute="full",
        ),
    ),
    "deepspeed-zero3": (
        "llama2-70b",
        "dgx-h100",
        dict(
            nodes=4, fabric="ib-ndr", global_batch=64, seq_len=4096, zero=3, memory_recipe="deepspeed", recompute="full"
        ),
    ),
}


def snapshot() -> dict:
    from distlab import planner, training, validation

    out: dict = {"validate": {}, "validate_fixed": {}, "validate_calibration": {}, "extra": {}}
    for run in validation.load_runs("all"):
        block = run["distlab"]
        if not block["expressible"]:
            continue
        rid = run["id"]
        for key, extra in (("validate", None), ("validate_fixed", 0.5), ("validate_calibration", (0.7, 2.0))):
            kwargs = dict(block["estimate"])
            if key == "validate_fixed":
                kwargs["efficiency"] = extra
            elif key == "validate_calibration":
                if kwargs.get("efficiency") is not None:
                    continue
                kwargs["calibration"] = extra
            try:
                if key == "validate":
                    est = validation.predict(run)
                else:
                    est = training.estimate(validation.run_model(run), validation.run_cluster(run), **kwargs)
                out[key][rid] = est.to_dict()
            except Exception as exc:  # noqa: BLE001 - the refusal itself is part of the behaviour
                out[key][rid] = {"error": f"{type(exc).__name__}: {exc}"}
    out["validate_cli"] = validation.compare("all").to_dict()
    # lesson 7 (notebooks/07_training_lab.ipynb)
    scenario = dict(nodes=32, global_batch=256, seq_len=8192)
    config = dict(tp=8, pp=4, micro_batch_size=1, zero=1, recompute="selective", sequence_parallel=True)
    fabrics = ["ethernet-100g", "ib-hdr", "ib-ndr"]
    out["lesson7_estimates"] = {
        f: training.estimate("llama3.1-70b", "dgx-h100", fabric=f, **config, **scenario).to_dict() for f in fabrics
    }
    out["lesson7_plans"] = {f: _plan(planner.plan("llama3.1-70b", "dgx-h100", fabric=f, **scenario)) for f in fabrics}
    out["lesson7_plans"]["fsdp2"] = _plan(
        planner.plan("llama3.1-70b", "dgx-h100", fabric="ib-ndr", memory_recipe="fsdp2", **scenario)
    )
    for name, (model, node, kwargs) in EXTRA_ESTIMATES.items():
        out["extra"][name] = training.estimate(model, node, **kwargs).to_dict()
    out["moe_plan"] = _plan(
        planner.plan("mixtral-8x7b", "dgx-h100", nodes=2, fabric="ib-ndr", global_batch=32, seq_len=4096)
    )
    out["fixed_plan"] = _plan(planner.plan("llama2-7b", "dgx-a100", nodes=2, global_batch=64, efficiency=0.5))
    return _plain(out)


def compare(a, b, rtol: float, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{path}: keys only before {sorted(set(a) - set(b))}" for _ in [0] if set(a) - set(b)]
        diffs += [f"{path}: keys only after {sorted(set(b) - set(a))}" for _ in [0] if set(b) - set(a)]
        for k in sorted(set(a) & set(b)):
            diffs += compare(a[k], b[k], rtol, f"{path}.{k}")
        return diffs
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} -> {len(b)}"]
        if (
            a
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in a)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)
        ):
            x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
            bad = ~np.isclose(x, y, rtol=rtol, atol=0.0) & ~((x == y) | (np.isnan(x) & np.isnan(y)))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                return [f"{path}: {int(bad.sum())} of {x.size} differ, first [{i}] {x[i]!r} -> {y[i]!r}"]
            return []
        diffs = []
        for i, (x, y) in enumerate(zip(a, b)):
            diffs += compare(x, y, rtol, f"{path}[{i}]")
        return diffs
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
            return [f"{path}: {a!r} -> {b!r}"]
        if a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= rtol * max(abs(a), abs(b)):
            return []
        return [f"{path}: {a!r} -> {b!r} ({(b - a) / a if a else float('inf'):+.3e} relative)"]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "dump":
        with open(argv[1], "w") as f:
            json.dump(snapshot(), f)
        print(f"wrote {argv[1]}")
        return 0
    if len(argv) >= 3 and argv[0] == "compare":
        rtol = float(argv[argv.index("--rtol") + 1]) if "--rtol" in argv else 1e-9
        with open(argv[1]) as f:
            before = json.load(f)
        with open(argv[2]) as f:
            after = json.load(f)
        diffs = compare(before, after, rtol)
        for d in diffs:
            print(d)
        print(f"{len(diffs)} difference(s) beyond {rtol:g} relative")
        return 1 if diffs else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
