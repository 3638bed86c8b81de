"""Out-of-memory triage (Lesson 8b §1; the single fixes: Lesson 7): the production ladder of fixes, each priced by re-running
distlab.training.estimate().

The order (TRIAGE_ORDER): a smaller micro-batch with more gradient accumulation, selective then full
activation recomputation (Korthikanti et al. 2022), the next ZeRO stage (Rajbhandari et al. 2020), twice
the tensor-parallel degree, twice the pipeline depth. ``explain_infeasible`` lists the single fixes
(lesson 7's calculator); ``oom_triage`` also climbs the cumulative ladder.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._arguments import estimate_config, recompute_mode
from .errors import ConfigurationError
from .training import StepEstimate, estimate
from .units import format_bytes, format_seconds, wrap_text

__all__ = [
    "TRIAGE_ORDER",
    "TriageStep",
    "OOMTriage",
    "MAX_LADDER_RUNGS",
    "oom_triage",
    "explain_infeasible",
    "memory_modes_index",
    "format_fixes",
]


#: The kinds of fix in the order production practice tries them (cheapest to change first).
TRIAGE_ORDER = ("micro-batch", "recomputation", "ZeRO", "TP", "PP")


@dataclass(frozen=True)
class TriageStep:
    """One fix of an out-of-memory triage, priced by estimate().

    change: the words ('micro_batch_size=2', 'selective recomputation', 'ZeRO-1', 'tp=4', ...);
    config: estimate()'s keywords after the fix (the whole configuration for a ladder rung,
    the changed keywords only for a single fix); memory_per_gpu_bytes and step_time_s of the
    result; saves_bytes against the configuration the fix was applied to (for a single fix,
    the given one; on the ladder, the previous rung); saves_total_bytes and time_cost_s
    against the given configuration. skipped: why the fix could not be applied (then the
    numbers are those of the configuration it was tried on, and it saves nothing). note: why an
    applied fix saves nothing (a smaller micro-batch while every microbatch is in flight).
    """

    kind: str
    change: str
    config: dict
    memory_per_gpu_bytes: float
    saves_bytes: float
    saves_total_bytes: float
    step_time_s: float
    time_cost_s: float
    fits: bool
    feasible: bool
    skipped: str | None = None
    estimate: "StepEstimate | None" = None
    note: str | None = None

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "change": self.change,
            "config": dict(self.config),
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "saves_bytes": self.saves_bytes,
            "saves_total_bytes": self.saves_total_bytes,
            "step_time_s": self.step_time_s,
            "time_cost_s": self.time_cost_s,
            "fits": self.fits,
            "feasible": self.feasible,
            "skipped": self.skipped,
            "note": self.note,
        }


@dataclass(frozen=True)
class OOMTriage:
    """What to do about a configuration that does not fit: single fixes and the cumulative ladder.

    base: the given configuration's StepEstimate. fixes: one change each from the given
    configuration, in TRIAGE_ORDER (every higher recomputation mode and ZeRO stage; the next
    smaller micro-batch, twice the TP and twice the PP degree). ladder: the fixes applied one
    after another in TRIAGE_ORDER (micro-batch halvings down to 1, selective then full
    recomputation, each higher ZeRO stage, TP doublings, PP doublings) until the configuration
    fits; empty when it already fits.
    """

    base: StepEstimate
    fixes: tuple
    ladder: tuple

    @property
    def already_fits(self) -> bool:
        return self.base.fits

    @property
    def first_fit(self) -> TriageStep | None:
        """The ladder rung at which the configuration first fits (None: already fits, or nothing does)."""
        for step in self.ladder:
            if step.fits and step.skipped is None:
                return step
        return None

    def summary(self) -> str:
        """The verdict, the single fixes and the ladder as lines of text."""
        b = self.base
        cap, headroom = b.memory.capacity_bytes, b.memory.headroom_bytes
        if cap is None or headroom is None:  # estimate() always prices a GPU; a hand-built StepEstimate may not
            raise ConfigurationError("an OOM triage needs the GPU's capacity: its base estimate has none")
        if self.already_fits:
            return (
                f"already fits: {format_bytes(b.memory.total_bytes)} of the {format_bytes(cap)} per GPU "
                f"({format_bytes(headroom)} free); nothing to fix"
            )
        lines = [
            f"needs {format_bytes(b.memory.total_bytes)} per GPU, {format_bytes(-headroom)} over "
            f"the {format_bytes(cap)}; step {format_seconds(b.step_time_s)}",
            "single fixes (each from the given configuration):",
        ]
        lines += [_triage_line(f, total=False) for f in self.fixes]
        lines.append("ladder (each rung on top of the previous, until it fits):")
        lines += [_triage_line(f, total=True) for f in self.ladder]
        first = self.first_fit
        lines.append(
            f"first fit: {first.change} at rung {self.ladder.index(first) + 1}"
            if first
            else "the ladder ends without a configuration that fits"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        first = self.first_fit
        return {
            "already_fits": self.already_fits,
            "base": self.base.to_dict(),
            "fixes": [f.to_dict() for f in self.fixes],
            "ladder": [f.to_dict() for f in self.ladder],
            "first_fit": None if first is None else first.to_dict(),
        }


def _triage_line(step: TriageStep, total: bool) -> str:
    if step.skipped:
        # the reason broken at spaces, continued under it, so that no line is wider than a notebook's output
        return wrap_text(f"  {step.change:<28} skipped: {step.skipped}", indent=" " * 40)
    saved = step.saves_total_bytes if total else step.saves_bytes
    cost = abs(step.time_cost_s)
    delta = "same" if cost < 1e-9 else f"{'+' if step.time_cost_s > 0 else '-'}{format_seconds(cost)}"
    return (
        f"  {step.change:<28} saves {format_bytes(saved):>9} -> {format_bytes(step.memory_per_gpu_bytes):>9} "
        f"per GPU, step {format_seconds(step.step_time_s):>8} ({delta}), {'fits' if step.fits else 'still too big'}"
        + (f"\n  {'':<28} ({step.note})" if step.note else "")
    )


def _micro_batch_note(est: StepEstimate) -> str:
    """Why a smaller micro-batch saved nothing: the in-flight sequences b x min(p, m) did not change."""
    c = est.config
    b, m, p = c["micro_batch_size"], est.microbatches, c["pp"]
    if c["schedule"] == "gpipe":
        return f"saves nothing: GPipe keeps all m microbatches in flight, b x m = {b * m} sequences either way"
    return f"saves nothing while m <= p: all m = {m} microbatches in flight (p = {p}), b x m = {b * m} either way"


def _next_fixes(c: dict, every: bool) -> list[tuple[str, str, dict | None]]:
    """(kind, words, keyword changes) of the next fix of each kind from configuration c (estimate's config).

    every: all higher recomputation modes and ZeRO stages (single fixes); else only the next one; the
    changes of a TP or PP doubling that dp cannot pay for (dp odd) are None.
    """
    out: list[tuple[str, str, dict | None]] = []
    b = c["micro_batch_size"]
    if b > 1:
        smaller = max(d for d in range(1, b) if b % d == 0)  # keeps B / (dp b) whole
        out.append(("micro-batch", f"micro_batch_size={smaller}", dict(micro_batch_size=smaller)))
    # with flash attention the scores are never stored: selective recomputation would save nothing
    lighter = ("full",) if c.get("attention", "flash") == "flash" else ("selective", "full")
    modes = [mode for mode in lighter if memory_modes_index(mode) > memory_modes_index(c["recompute"])]
    out += [("recomputation", f"{mode} recomputation", dict(recompute=mode)) for mode in modes[: None if every else 1]]
    stages = list(range(c["zero"] + 1, 4))
    out += [("ZeRO", f"ZeRO-{z}", dict(zero=z)) for z in stages[: None if every else 1]]
    for dim in ("tp", "pp"):
        out.append(
            (dim.upper(), f"{dim}={2 * c[dim]}", dict({dim: 2 * c[dim]}, dp=c["dp"] // 2) if c["dp"] % 2 == 0 else None)
        )
    return out


def _try_fix(model, cluster, config, kind, words, change, before, base, price=estimate):
    """Apply one fix to `config` (keywords), re-run estimate (`price`: estimate or a caller's remembered copy of
    it); a TriageStep (skipped when invalid)."""
    if change is None:
        return None, TriageStep(
            kind,
            words,
            dict(config),
            before.memory.total_bytes,
            0.0,
            base.memory.total_bytes - before.memory.total_bytes,
            before.step_time_s,
            before.step_time_s - base.step_time_s,
            before.fits,
            before.feasible,
            skipped=f"dp={before.config['dp']} is odd: doubling {kind} needs dp to halve",
            estimate=before,
        )
    new = {**config, **change}
    try:
        est = price(model, cluster, **new)
    except ConfigurationError as exc:
        return None, TriageStep(
            kind,
            words,
            new,
            before.memory.total_bytes,
            0.0,
            base.memory.total_bytes - before.memory.total_bytes,
            before.step_time_s,
            before.step_time_s - base.step_time_s,
            before.fits,
            before.feasible,
            skipped=str(exc),
            estimate=before,
        )
    mem = est.memory.total_bytes
    saved = before.memory.total_bytes - mem
    note = _micro_batch_note(est) if kind == "micro-batch" and abs(saved) <= 1e-9 * before.memory.total_bytes else None
    return new, TriageStep(
        kind,
        words,
        new,
        mem,
        saved,
        base.memory.total_bytes - mem,
        est.step_time_s,
        est.step_time_s - base.step_time_s,
        est.fits,
        est.feasible,
        estimate=est,
        note=note,
    )


#: Most rungs a ladder climbs (micro-batch halvings + 2 + 3 + TP and PP doublings stay far below it).
MAX_LADDER_RUNGS = 64


def _single_fixes(model, cluster, config: dict, base, price=estimate) -> list[TriageStep]:
    """Each fix of TRIAGE_ORDER applied alone to `config` (whose estimate is `base`), priced by `price`
    (estimate())."""
    return [
        _try_fix(model, cluster, config, kind, words, change, base, base, price)[1]
        for kind, words, change in _next_fixes(base.config, every=True)
    ]


def oom_triage(model, cluster, **config) -> OOMTriage:
    """Out-of-memory triage: the fixes production tries, in order, each priced by re-running estimate().

    config: estimate()'s keyword arguments. The order (TRIAGE_ORDER): a smaller micro-batch with
    more gradient accumulation (m = B / (dp b) grows, the global batch stays), selective then
    full activation recomputation (Korthikanti et al. 2022), the next ZeRO stage (Rajbhandari et
    al. 2020), twice the tensor-parallel degree, twice the pipeline depth (dp halves to keep the
    GPUs). Returns an OOMTriage with the single fixes from the given configuration and the
    cumulative ladder (each rung re-validated; a rung estimate() refuses is recorded as skipped
    with its reason, and its kind is left). Invalid input raises ConfigurationError (from
    estimate); a configuration that fits gives an empty ladder (already_fits). Lesson 8b §1.

    Llama 2 7B, pure data parallelism on one DGX H100 node: 16 bytes per parameter (108 GB) of model states
    overflow 80 GB whatever the activations; recomputation cannot help, ZeRO-1 shards the 12 optimizer bytes
    over 8 GPUs: 4 x 6.74e9 + 12 x 6.74e9 / 8 = 37 GB, plus the layer inputs that full recomputation keeps.

    With flash attention (the default) the scores are never stored, so the ladder skips selective
    recomputation, which would save nothing.

    >>> t = oom_triage('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096,
    ...                attention='unfused')
    >>> [step.change for step in t.ladder]
    ['selective recomputation', 'full recomputation', 'ZeRO-1']
    >>> [step.change for step in oom_triage('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8,
    ...                                     seq_len=4096).ladder]
    ['full recomputation', 'ZeRO-1']
    """
    estimate_config(config)
    base = estimate(model, cluster, **config)
    config = dict(config)
    fixes = _single_fixes(model, cluster, config, base)
    ladder: list[TriageStep] = []
    if not base.fits:
        current, est = config, base
        for kind in TRIAGE_ORDER:
            while len(ladder) < MAX_LADDER_RUNGS:
                options = [f for f in _next_fixes(est.config, every=False) if f[0] == kind]
                if not options:
                    break
                _, words, change = options[0]
                new, step = _try_fix(model, cluster, current, kind, words, change, est, base)
                ladder.append(step)
                if new is None:
                    break
                current, est = new, step.estimate
                if est.fits:
                    return OOMTriage(base, tuple(fixes), tuple(ladder))
    return OOMTriage(base, tuple(fixes), tuple(ladder))


def explain_infeasible(model, cluster, *, price=estimate, **config) -> list[dict]:
    """Single-change fixes for a configuration that does not fit (oom_triage's fixes), as dicts.

    Each: change (words), config (the changed keywords), memory_per_gpu_bytes, saves_bytes
    (memory per GPU saved against the given configuration), fits, feasible, step_time_s; the
    ones that fit first (fastest first), then the rest by memory per GPU (smallest first).
    Invalid variants are left out. Empty when the configuration already fits. Lesson 7 §2.
    `price` prices the configuration and each variant: estimate, or a caller's remembered copy of it (the training
    lab passes widgets.filling.remembered_estimate, so the variants it priced already are not priced again).

    Llama 2 7B, pure data parallelism on one DGX H100 node, 4K tokens and no recomputation: ZeRO-3 and ZeRO-2
    fit on their own (ZeRO-2 is priced 4 ms faster here: both hide their traffic behind compute, but ZeRO-3 moves
    1.5x the bytes, and the compute beside hidden traffic runs 18.9% slower, efficiency.OVERLAP_SLOWDOWN;
    ZeRO-3's optimizer step is shorter, its shard smaller), and so does tp = 2 (81.9 GB of the 84.9 GB CUDA sees of an
    H100). With unfused attention ZeRO-1 does not: it still keeps 2 + 2 bytes per parameter
    and the activations with the stored scores (88.7 GB). With flash attention (the default) it does: 4 x 6.74e9 +
    12 x 6.74e9 / 8 = 37.1 GB of model states plus 32 layers x 4096 tokens x (4h + 4h + 3 x 11008) x 2 B =
    17.2 GB of activations = 54.3 GB; so do tp = 2 and pp = 2.

    >>> fixes = explain_infeasible('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096,
    ...                            attention='unfused')
    >>> [f['change'] for f in fixes if f['fits']]
    ['ZeRO-2', 'ZeRO-3', 'tp=2']
    >>> fixes = explain_infeasible('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096)
    >>> [f['change'] for f in fixes if f['fits']]
    ['ZeRO-2', 'ZeRO-1', 'ZeRO-3', 'tp=2', 'pp=2']
    """
    estimate_config(config)
    base = price(model, cluster, **config)
    if base.fits:
        return []
    # the single fixes only (oom_triage's `fixes`): the ladder, which climbs them one on another, is not needed here
    base_keys = set(config)
    fixes = []
    for f in _single_fixes(model, cluster, dict(config), base, price):
        if f.skipped:
            continue
        change = {k: v for k, v in f.config.items() if k not in base_keys or config[k] != v}
        fixes.append(
            dict(
                change=f.change,
                config=change,
                memory_per_gpu_bytes=f.memory_per_gpu_bytes,
                saves_bytes=f.saves_bytes,
                fits=f.fits,
                feasible=f.feasible,
                step_time_s=f.step_time_s,
            )
        )
    fixes.sort(key=lambda f: (not f["fits"], f["step_time_s"] if f["fits"] else f["memory_per_gpu_bytes"]))
    return fixes


def memory_modes_index(mode) -> int:
    """Position of a recomputation mode in memory.RECOMPUTE_MODES (none 0, selective 1, full 2): the order the
    triage ladder climbs. Lesson 8b §1.

    >>> memory_modes_index('selective')
    1
    """
    from . import memory

    return memory.RECOMPUTE_MODES.index(recompute_mode(mode))


def format_fixes(fixes: list[dict]) -> str:
    """explain_infeasible's fixes as lines of text. Lesson 7 §2.

    >>> format_fixes([])
    'no single change tried makes it fit'
    """
    keys = ("change", "saves_bytes", "memory_per_gpu_bytes", "fits", "step_time_s")
    if not isinstance(fixes, (list, tuple)) or not all(
        isinstance(f, dict) and all(k in f for k in keys) for f in fixes
    ):
        raise ConfigurationError(f"fixes must be explain_infeasible()'s list of dicts (keys {', '.join(keys)})")
    if not fixes:
        return "no single change tried makes it fit"
    return "\n".join(
        f"{f['change']:<26} saves {format_bytes(f['saves_bytes']):>9} -> {format_bytes(f['memory_per_gpu_bytes']):>9} "
        f"per GPU, {'fits' if f['fits'] else 'still too big'}"
        + (f", step {format_seconds(f['step_time_s'])}" if f["fits"] else "")
        for f in fixes
    )
