"""How good is the step model? Published measured training runs against training.estimate().

The runs ship in distlab/data/published_runs.json. Each keeps the source's citation, table and row, an exact
quote, and the configuration and result as published; its `distlab` block is our mapping to an estimate() call,
with every assumption stated, the measured step time derived from what the source publishes, and a role:

    calibration  Narayanan et al. 2021 Table 1 (and hardware microbenchmarks): the model may be fitted here.
    validation   other published runs, never fitted to: Llama 3, torchtitan, MosaicML MPT, BLOOM (independent);
                 Megatron-Core on H100 and Korthikanti et al. 2022 (second tier: same software, same machine).
    reference    reported, never asserted: Narayanan Table 2, MT-NLG (secondary), and runs estimate() cannot
                 express today (the reason is stated per run).

Measured step time, from the source's own numbers: an iteration time as stated; TFLOP/s per GPU with the
source's own FLOP count, t = F / (TFLOP/s x GPUs); or tokens/s, t = B s / tokens/s.
Signed error = (predicted - measured) / measured.

Taught in Lesson 7 §8 ("How good is this model?"); `distlab validate` prints the table.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from importlib import resources

from .errors import ConfigurationError, DistlabError

__all__ = [
    "ErrorBand",
    "error_band",
    "MIN_BAND_RUNS",
    "ROLES",
    "MEASURED_FORMULAS",
    "ComparisonRow",
    "Comparison",
    "load_runs",
    "run",
    "microbenchmarks",
    "measured_step_time",
    "run_model",
    "is_moe_run",
    "run_cluster",
    "predict",
    "power_capped_runs",
    "compare",
]

#: The roles a run can have (see the module docstring).
ROLES = ("calibration", "validation", "reference")

#: How a source's published quantity becomes a step time in seconds (the `formula` of measured_step_time).
MEASURED_FORMULAS = {
    "stated": "iteration time as published",
    "narayanan2021-eq3": "t = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) / (TFLOP/s per GPU x GPUs)",
    "megatron-lm-num-floating-point-operations": "t = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) / (TFLOP/s per GPU x GPUs)",
    "palm-6n-12lhqt": "t = (6N + 12 l h s) B s / (TFLOP/s per GPU x GPUs)",
    "tokens-per-s-per-gpu": "t = B s / (tokens/s per GPU x GPUs)",
    "tokens-per-s": "t = B s / tokens/s",
}

_REQUIRED_RUN = ("id", "source", "where", "url", "quote", "hardware", "model", "parallelism", "measured", "distlab")
_REQUIRED_BLOCK = (
    "cite",
    "role",
    "tier",
    "expressible",
    "reason",
    "model",
    "cluster",
    "estimate",
    "model_assumptions",
    "hardware_assumptions",
    "configuration_assumptions",
    "measured_step_time",
)
_REQUIRED_MEASURED = ("quantity", "formula", "inputs", "seconds", "derivation")


def _check(run_: dict) -> None:
    rid = run_.get("id", "?")
    missing = [k for k in _REQUIRED_RUN if k not in run_]
    block = run_.get("distlab", {})
    missing += [f"distlab.{k}" for k in _REQUIRED_BLOCK if k not in block]
    measured = block.get("measured_step_time", {})
    missing += [f"distlab.measured_step_time.{k}" for k in _REQUIRED_MEASURED if k not in measured]
    if missing:
        raise ConfigurationError(f"published run {rid}: missing {', '.join(missing)}")
    for key in ("where", "url", "quote"):
        if not str(run_[key]).strip():
            raise ConfigurationError(f"published run {rid}: empty {key}")
    if block["role"] not in ROLES:
        raise ConfigurationError(f"published run {rid}: role {block['role']!r}; valid: {', '.join(ROLES)}")
    if block["expressible"] and (block["estimate"] is None or block["model"] is None or block["cluster"] is None):
        raise ConfigurationError(f"published run {rid}: expressible but without model, cluster or estimate")
    if not block["expressible"] and not block["reason"]:
        raise ConfigurationError(f"published run {rid}: not expressible, and no reason given")
    if measured["formula"] is not None and measured["formula"] not in MEASURED_FORMULAS:
        raise ConfigurationError(f"published run {rid}: unknown measured formula {measured['formula']!r}")
    if not str(measured["derivation"]).strip():
        raise ConfigurationError(f"published run {rid}: no derivation of the measured step time")


@functools.lru_cache(maxsize=1)
def _data() -> dict:
    text = resources.files("distlab").joinpath("data/published_runs.json").read_text(encoding="utf-8")
    data = json.loads(text)
    ids = [r.get("id") for r in data["runs"]]
    if len(set(ids)) != len(ids):
        raise ConfigurationError("published runs: duplicate ids")
    for r in data["runs"]:
        _check(r)
    return data


def _role(role: str) -> str:
    r = str(role).strip().lower()
    if r not in ROLES + ("all",):
        raise ConfigurationError(f"role={role!r}; valid: {', '.join(ROLES)}, all")
    return r


def load_runs(role: str = "all") -> list[dict]:
    """The published runs of one role ('calibration', 'validation', 'reference' or 'all'), checked on load:
    every run has its citation, where, url, quote, role and a derivation of its measured step time. Lesson 7 §8.

    >>> len(load_runs("calibration"))
    10
    >>> load_runs("calibration")[0]["distlab"]["cite"]
    'Narayanan et al. 2021'
    """
    r = _role(role)
    return [x for x in _data()["runs"] if r == "all" or x["distlab"]["role"] == r]


def run(run_id: str) -> dict:
    """One published run by id. Lesson 7 §8.

    >>> run("korthikanti2022-t5-22b-full-recompute")["measured"]["iteration_time_s"]
    1.42
    """
    if not isinstance(run_id, str):
        raise ConfigurationError(f"run_id={str(run_id)[:40]!r} must be the id of a published run (a string)")
    for x in _data()["runs"]:
        if x["id"] == run_id:
            return x
    close = [x["id"] for x in _data()["runs"] if str(run_id).split("-")[0] in x["id"]][:5]
    raise ConfigurationError(f"no published run {run_id!r}" + (f"; close: {', '.join(close)}" if close else ""))


def microbenchmarks(role: str = "all") -> list[dict]:
    """Published hardware microbenchmarks (nccl-tests bus bandwidths, best-shape GEMM efficiency, flash-attention
    rates, layer times): role 'calibration', except Korthikanti's layer times (from a validation source:
    'reference'). Lesson 7 §8.

    >>> sorted({m["distlab"]["role"] for m in microbenchmarks()})
    ['calibration', 'reference']
    """
    r = _role(role)
    return [m for m in _data()["microbenchmarks"] if r == "all" or m["distlab"]["role"] == r]


def _published(run_) -> dict:
    """A published run: one of load_runs()'s records, or its id (anything else is our error)."""
    if isinstance(run_, str):
        return run(run_)
    if isinstance(run_, dict) and any(run_ is x or run_ == x for x in _data()["runs"]):
        return run_
    raise ConfigurationError(f"run_={str(run_)[:40]!r} is not a published run: pass validation.run(id) or the id")


def measured_step_time(run_: dict):
    """The measured step time in seconds, derived from what the source publishes (None when it cannot be):
    an iteration time as stated, TFLOP/s per GPU with the source's own FLOP count, or tokens/s.

    Formulas (MEASURED_FORMULAS): Narayanan et al. 2021 Eq. 3, t = 96 B s l h^2 (1 + s/6h + V/16lh) / (X n);
    Megatron-LM's counter, 72 B s l h^2 (1 + s/6h + V/12lh); PaLM App. B, (6N + 12 l h s) B s; tokens,
    t = B s / (tokens/s).

    Lesson 7 §8.

    >>> round(measured_step_time(run("narayanan2021-t1-1.7b")), 4)   # Eq. 3 at 137 TFLOP/s x 32 GPUs
    3.528
    >>> measured_step_time(run("bloom-176b-384gpu-iter85376"))
    104.7
    """
    run_ = _published(run_)
    m = run_["distlab"]["measured_step_time"]
    formula, x = m["formula"], m["inputs"]
    if m["seconds"] is None or formula is None:
        return None
    if formula == "stated":
        return float(x["iteration_time_s"])
    if formula == "tokens-per-s":
        return x["batch"] * x["seq_len"] / x["tokens_per_s"]
    if formula == "tokens-per-s-per-gpu":
        return x["batch"] * x["seq_len"] / (x["tokens_per_s_per_gpu"] * x["gpus"])
    B, s = x["batch"], x["seq_len"]
    rate = x["tflops_per_gpu"] * 1e12 * x["gpus"]
    if formula == "palm-6n-12lhqt":
        return (6 * x["params"] + 12 * x["layers"] * x["hidden"] * s) * B * s / rate
    l, h, V = x["layers"], x["hidden"], x["vocab"]
    if formula == "narayanan2021-eq3":
        from .training import megatron_flops_per_iteration

        return megatron_flops_per_iteration(B, s, l, h, V) / rate
    # megatron-lm-num-floating-point-operations (checked on load: no other formula gets here)
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / rate


def run_model(run_: dict):
    """The run's model as a TransformerModel (our mapping; its assumptions are in distlab.model_assumptions).

    Lesson 7 §8.

    >>> m = run_model(run("llama3-405b-8192gpu-cp1-seq8192"))
    >>> (m.gated_mlp, m.norm, m.kv_heads, m.tied_embeddings)
    (True, 'rmsnorm', 8, False)
    """
    from .models import TransformerModel
    from .moe.catalog import MoEModel, model as moe_model

    run_ = _published(run_)
    block = run_["distlab"]
    if block["model"] is None:
        raise ConfigurationError(f"{run_['id']}: no model shape ({block['reason']})")
    shape, source = block["model"], f"{block['cite']}, {run_['where']}"
    if "moe_catalog" in shape:  # a mixture of experts of distlab.moe's catalog, as the run's recipe builds it
        return moe_model(shape["moe_catalog"])
    return (MoEModel if "experts" in shape else TransformerModel)(**{"source": source, **shape})


def is_moe_run(run_: dict) -> bool:
    """Whether a run trains a mixture of experts (its model names distlab.moe's catalog or has experts). Lesson 7 §8.

    >>> is_moe_run(run("dgxc-h100-llama31-8b-8gpu-fp8"))
    False
    """
    shape = _published(run_)["distlab"]["model"] or {}
    return "moe_catalog" in shape or "experts" in shape


def run_cluster(run_: dict):
    """The catalog cluster closest to the run's stated hardware (distlab.hardware_assumptions says why).

    Lesson 7 §8.

    >>> c = run_cluster(run("narayanan2021-t1-1t"))
    >>> (c.node.name, c.gpus, c.fabric.name)
    ('dgx-a100', 3072, 'ib-hdr')
    """
    import dataclasses

    from .hardware import Accelerator, cluster, node

    run_ = _published(run_)
    c = run_["distlab"]["cluster"]
    if c is None:
        raise ConfigurationError(f"{run_['id']}: no cluster ({run_['distlab']['reason']})")
    part = c.get("accelerator")
    if part is None:
        return cluster(c["node"], c["nodes"], c["fabric"])
    # a stated GPU the catalog lacks (torchtitan's 96 GB HBM2e, 500 W H100): the catalog node with that part, its
    # FP8 peak where the run states one (the Float8 rows)
    peaks = {"bf16": part["bf16_flops"], "fp16": part["bf16_flops"]}
    if part.get("fp8_flops") is not None:
        peaks["fp8"] = part["fp8_flops"]
    gpu = Accelerator(
        part["name"],
        peaks,
        memory_bytes=part["memory_bytes"],
        memory_bandwidth=part["memory_bandwidth"],
        source=part["source"],
        tdp_w=part.get("tdp_w"),
        power_limit_w=part.get("power_limit_w"),
        capped_peak_source=part.get("capped_peak_source", ""),
    )
    return cluster(dataclasses.replace(node(c["node"]), accelerator=gpu), c["nodes"], c["fabric"])


def power_capped_runs(role: str = "validation", priced: bool | None = None) -> list:
    """The ids of the expressible runs of a role whose GPU ran below its TDP (hardware.Accelerator.power_capped);
    priced True: only those whose part states its peaks at the cap (capped_peak_source), False: only those priced at
    the TDP's peaks, the cap not modelled; `distlab validate` lists both. Lesson 7 §8.

    >>> [r for r in power_capped_runs(priced=True) if r.startswith("torchtitan-h100")][:1]
    ['torchtitan-h100-128gpu-llama31-405b-bf16']
    """
    out = []
    for run_ in load_runs(role):
        if run_["distlab"]["expressible"] and run_["distlab"]["cluster"] is not None:
            gpu = run_cluster(run_).accelerator
            if gpu.power_capped and (priced is None or priced == bool(gpu.capped_peak_source)):
                out.append(run_["id"])
    return out


def predict(run_: dict):
    """training.estimate() for the run's mapping, out of the box (default efficiency, no per-run tuning).
    Raises ConfigurationError when the run cannot be expressed, or estimate() refuses its configuration.

    Lesson 7 §8.

    >>> est = predict(run("korthikanti2022-t5-175b-seq-par-selective"))
    >>> (est.config["tp"], est.config["pp"], est.config["chunks"], est.config["recompute"])
    (8, 8, 3, 'selective')
    """
    from .training import estimate

    run_ = _published(run_)
    block = run_["distlab"]
    if not block["expressible"]:
        raise ConfigurationError(f"{run_['id']}: not expressible by estimate(): {block['reason']}")
    return estimate(run_model(run_), run_cluster(run_), **block["estimate"])


@dataclass(frozen=True)
class ComparisonRow:
    """One run: measured and predicted step time (seconds), signed error in %, and its status:
    'predicted', 'does not fit' (priced, but over the GPU's memory or otherwise infeasible), 'refused'
    (estimate() raised), 'not expressible', or 'no measured time'. reason says why for all but 'predicted'."""

    id: str
    source: str
    where: str
    role: str
    tier: str
    measured_s: float | None
    predicted_s: float | None
    error_percent: float | None
    status: str
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _errors(rows) -> tuple:
    """(mean |error|, max |error|, id of the max) over rows, or (None, None, None)."""
    if not rows:
        return None, None, None
    worst = max(rows, key=lambda r: abs(r.error_percent))
    return sum(abs(r.error_percent) for r in rows) / len(rows), abs(worst.error_percent), worst.id


def _stats(rows) -> dict:
    scored = [r for r in rows if r.status == "predicted"]
    priced = [r for r in rows if r.status in ("predicted", "does not fit")]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    mean, worst, worst_id = _errors(scored)
    mean_priced, worst_priced, _ = _errors(priced)
    return {
        "runs": len(rows),
        "scored": len(scored),
        "mean_abs_error_percent": mean,
        "max_abs_error_percent": worst,
        "max_abs_error_run": worst_id,
        "status_counts": counts,
        "priced": len(priced),
        "mean_abs_error_percent_priced": mean_priced,
        "max_abs_error_percent_priced": worst_priced,
    }


@dataclass(frozen=True)
class Comparison:
    """compare()'s answer: one row per run, and per role (and per validation tier) the number of runs, how many
    were scored (status 'predicted'), mean and max |error| in % over those, and the count of each status; the
    *_priced figures also count the runs priced but over memory (the step-time error alone)."""

    rows: tuple
    summary: dict
    tiers: dict
    groups: dict | None = None  # validation runs split by "gpu", "precision", "engine", "model" (split_validation)

    def to_dict(self) -> dict:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "summary": self.summary,
            "tiers": self.tiers,
            "groups": self.groups,
        }


def _row(run_: dict) -> ComparisonRow:
    block = run_["distlab"]
    measured = measured_step_time(run_)
    base = dict(
        id=run_["id"],
        source=block["cite"],
        where=run_["where"],
        role=block["role"],
        tier=block["tier"],
        measured_s=measured,
    )
    if not block["expressible"]:
        return ComparisonRow(
            **base, predicted_s=None, error_percent=None, status="not expressible", reason=block["reason"]
        )
    try:
        est = predict(run_)
    except DistlabError as exc:
        return ComparisonRow(**base, predicted_s=None, error_percent=None, status="refused", reason=str(exc))
    t = est.step_time_s
    error = None if measured is None else 100.0 * (t - measured) / measured
    if measured is None:
        return ComparisonRow(
            **base,
            predicted_s=t,
            error_percent=None,
            status="no measured time",
            reason=block["measured_step_time"]["derivation"],
        )
    if not est.feasible:
        return ComparisonRow(**base, predicted_s=t, error_percent=error, status="does not fit", reason=est.explain())
    return ComparisonRow(**base, predicted_s=t, error_percent=error, status="predicted")


def compare(role: str = "validation") -> Comparison:
    """Predicted against measured step time for every run of a role ('calibration', 'validation', 'reference'
    or 'all'): one row per run, never dropped (a run estimate() refuses or that does not fit is a row with its
    reason), and per role the mean and max |error| over the runs it could price and that fit.

    error % = 100 (predicted - measured) / measured.

    Lesson 7 §8.

    >>> c = compare("calibration")
    >>> len(c.rows), c.summary["calibration"]["runs"]
    (10, 10)
    """
    rows = tuple(_row(r) for r in load_runs(role))
    summary = {r: _stats([x for x in rows if x.role == r]) for r in ROLES if any(x.role == r for x in rows)}
    tier_names = sorted({x.tier for x in rows if x.role == "validation"})
    tiers = {t: _stats([x for x in rows if x.role == "validation" and x.tier == t]) for t in tier_names}
    return Comparison(rows=rows, summary=summary, tiers=tiers, groups=split_validation(rows))


#: The engine a run's memory recipe stands for (split_validation): the 16 B/param ZeRO-paper recipe is what the
#: papers of 2021-2022 (Megatron-LM, DeepSpeed) and the runs that state no engine are mapped with.
RECIPE_ENGINES = {
    "megatron": "megatron/nemo",
    "deepspeed": "deepspeed",
    "fsdp1": "fsdp1",  # Composer / llm-foundry (PyTorch FullyShardedDataParallel); 'fsdp1-pure' too
    "fsdp2": "fsdp2",  # torchtitan; 'fsdp2-sp-regather' too (Meta's Llama 3 stack, FSDP with Megatron-style SP)
    "zero-paper": "zero-paper",
}


def run_kind(run_: dict) -> dict:
    """A run's GPU family, precision and engine (by its memory recipe: RECIPE_ENGINES), as split_validation groups
    it. Lesson 7 §8.

    >>> run_kind(run("dgxc-h100-llama31-8b-8gpu-fp8"))
    {'gpu': 'h100', 'precision': 'fp8', 'engine': 'megatron/nemo', 'model': 'dense'}
    """
    given = run_["distlab"]["estimate"]
    recipe = str(given.get("memory_recipe", "zero-paper"))
    engine = next((e for prefix, e in RECIPE_ENGINES.items() if recipe.startswith(prefix)), recipe)
    gpu = _family(run_cluster(run_).accelerator.name) if run_["distlab"]["cluster"] is not None else "unstated"
    model = "mixture of experts" if is_moe_run(run_) else "dense"
    return {"gpu": gpu, "precision": str(given.get("precision", "mixed")), "engine": engine, "model": model}


def split_validation(rows) -> dict:
    """The validation rows' statistics (as compare()'s summary) split by GPU family, precision, engine and model kind:
    {"gpu": {"a100": stats, ...}, "precision": {...}, "engine": {...}}. Issue 30 asks the accuracy reported so."""
    by_id = {r["id"]: r for r in load_runs("validation")}
    kinds = {
        x.id: run_kind(by_id[x.id]) for x in rows if x.role == "validation" and by_id[x.id]["distlab"]["expressible"]
    }
    out: dict = {}
    for key in ("gpu", "precision", "engine", "model"):
        values = sorted({k[key] for k in kinds.values()})
        out[key] = {v: _stats([x for x in rows if x.id in kinds and kinds[x.id][key] == v]) for v in values}
    return out


#: The fewest validation runs an error band is the mean of: with fewer runs of the kind asked for, the kind widens
#: (the GPU family's runs in any precision, then every validation run) and the band says so.
MIN_BAND_RUNS = 3


@dataclass(frozen=True)
class ErrorBand:
    """The step model's error band for a kind of run: the mean |step-time error| (percent) over `runs` validation
    runs (published, never fitted to), `scope` saying which in words, and `matched` whether runs of the kind asked
    for (GPU family and precision) exist; if not, the band is borrowed from wider runs and says so. `dense_for_moe`: a
    mixture-of-experts step given the dense runs' band (no MoE run validated). `over`: the runs it is the mean of, in
    words ('H100 runs in mixed precision'; the scope says it after their count)."""

    percent: float
    runs: int
    scope: str
    matched: bool
    dense_for_moe: bool = False
    over: str = ""

    def short(self) -> str:
        """One line for an app: '±9.9%: mean |error| on 23 published H100 runs in mixed precision'."""
        why = " (dense models: no mixture-of-experts run validated yet)" if self.dense_for_moe else ""
        return f"±{self.percent:.1f}%: {self.scope.split(', never fitted to')[0]}" + (
            why or ("" if self.matched else " (none of this kind validated yet)")
        )

    def around(self, seconds: float) -> str:
        """'8.1 s ± 0.62 s' for a predicted step time: the band in the step's own unit (units.second_unit), to two
        significant digits (never '17.7 s ± 997 ms', two units in one figure: review v16, lesson 12)."""
        from .units import format_seconds, second_unit

        scale, unit = second_unit(seconds)
        band = seconds * self.percent / 100.0 / scale
        text = f"{band:.2g}"
        if "e" in text or ("." not in text and band < 10):
            text = f"{band:.1f}" if band < 10 else f"{band:,.0f}"
        return f"{format_seconds(seconds)} ± {text} {unit}"

    def parts_table(self, step) -> str:
        """A StepEstimate's parts, one a line: each in format_seconds and its share of the step (format_percent),
        then the step with this band (lesson 12's table printed "pipeline p2p 0.002 s", three fixed decimals where
        every other figure of the kit writes 2.15 ms: review v20)."""
        from .units import format_percent, format_seconds

        rows = [(k, format_seconds(v), format_percent(v / step.step_time_s)) for k, v in step.parts().items()]
        lines = [f"{name:<28}{seconds:>9} {share:>6}" for name, seconds, share in rows]
        return "\n".join(
            [*lines, f"{'step':<28}{format_seconds(step.step_time_s):>9}   ({self.around(step.step_time_s)})"]
        )


def _family(name: str) -> str:
    """A GPU's family for the error band: the catalog name's first word ('h100' of 'h100-sxm' and of torchtitan's
    stated 'h100-96gb-500w' part)."""
    return str(name).strip().lower().split("-")[0]


@functools.lru_cache(maxsize=1)
def _scored_validation_runs() -> tuple:
    """(GPU family, precision, mixture-of-experts or not, |error| %) of every validation run priced and fitting,
    computed once per process."""
    scored = []
    by_id = {r["id"]: r for r in load_runs("validation")}
    for row in compare("validation").rows:
        if row.status != "predicted" or row.error_percent is None:
            continue
        run_ = by_id[row.id]
        precision = str(run_["distlab"]["estimate"].get("precision", "mixed"))
        moe = is_moe_run(run_)
        scored.append((_family(run_cluster(run_).accelerator.name), precision, moe, abs(row.error_percent)))
    return tuple(scored)


def error_band(accelerator: str, precision: str = "mixed", moe: bool = False) -> ErrorBand:
    """The step model's validated error for runs like this one: the mean |step-time error| of training.estimate()
    out of the box on the validation runs (published, never fitted to) of the same GPU family and precision, dense or
    mixture-of-experts (`moe`) as this one; with fewer than MIN_BAND_RUNS of those, the family's runs of that kind in
    any precision, then every validation run of that kind, and the scope says the kind asked for has not been
    validated. A mixture-of-experts step with too few validated runs of its kind at every level borrows the dense
    runs' band and says so: it is not matched, its all-to-all and expert GEMMs never checked against a measured run.
    `distlab estimate`, `distlab plan`, the training lab and the capstone print a step time with it. Lesson 7 §8.

    >>> band = error_band("h100-sxm")
    >>> band.matched and band.runs >= MIN_BAND_RUNS and 0 < band.percent < 50
    True
    >>> error_band("h100-sxm", "fp8").runs  # dgxc-benchmarking 5, Megatron Bridge 25.11 2 and 26.x 2, torchtitan Float8 12
    21
    >>> error_band("b200", "fp8").runs  # Megatron Bridge 25.11 on DGX B200: Llama 3 8B and 3.1 405B, FP8-CS and MXFP8
    4
    >>> error_band("a100-80gb", "fp8").matched  # no A100 runs in FP8 (the A100 has no FP8)
    False
    >>> error_band("h100-sxm", "fp8", moe=True).matched  # one H100 MoE run in FP8: fewer than MIN_BAND_RUNS
    False
    """
    if not isinstance(accelerator, str) or not accelerator.strip():
        raise ConfigurationError(f"accelerator={accelerator!r} must be a GPU's catalog name such as 'h100-sxm'")
    if not isinstance(precision, str) or not precision.strip():
        raise ConfigurationError(f"precision={precision!r} must be a precision recipe's name such as 'mixed'")
    if not isinstance(moe, bool):
        raise ConfigurationError(f"moe={moe!r} must be True (a mixture-of-experts model) or False (a dense one)")
    family, precision = _family(accelerator), precision.strip().lower()
    runs = _scored_validation_runs()
    borrowed = moe and sum(m for _, _, m, _ in runs) < MIN_BAND_RUNS  # no MoE runs to speak of: the dense runs'
    moe = moe and not borrowed
    kind = "mixture-of-experts " if moe else ""
    kinds = (
        ([e for f, p, m, e in runs if (f, p, m) == (family, precision, moe)], f"{family.upper()} {kind}runs in {precision} precision"),
        ([e for f, _, m, e in runs if (f, m) == (family, moe)], f"{family.upper()} {kind}runs in any precision"),
        ([e for _, _, m, e in runs if m == moe], f"{kind}validation runs of every GPU and precision"),
    )  # fmt: skip
    for i, (errors, words) in enumerate(kinds):
        if len(errors) >= MIN_BAND_RUNS:
            scope = f"mean |error| on {len(errors)} published {words}, never fitted to (`distlab validate`)"
            if i:
                scope += f"; no {family.upper()} {kind}run in {precision} precision has been validated yet"
            if borrowed:
                scope += "; no mixture-of-experts run has been validated yet: this is the dense runs' band"
            return ErrorBand(sum(errors) / len(errors), len(errors), scope, i == 0 and not borrowed, borrowed, words)
    raise ConfigurationError("the validation set has too few priced runs for an error band")  # pragma: no cover
