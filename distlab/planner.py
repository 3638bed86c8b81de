"""Search every valid parallel configuration of a cluster, evaluated at once with NumPy.

The configurations: dp x tp x pp = GPUs, tp dividing the GPUs of a node and the attention
heads, pp up to the number of layers (uneven splits allowed: the busiest stage has
ceil(L / pp) layers), every micro-batch size dividing a replica's batch,
ZeRO stages 0-3, recomputation none / selective / full, sequence parallelism with tp > 1, and
GPipe or 1F1B, or interleaved 1F1B with every v that splits the layers evenly when the
microbatches are a multiple of pp (Megatron-LM's rule). For a mixture-of-experts model (distlab.moe) also
expert parallelism ep (every divisor of the routed experts) and expert tensor parallelism etp in {1, tp}, with
etp x ep x pp dividing the GPUs, and sequence parallelism whenever tp > 1 (Megatron-Core's rule). Each
is priced by distlab.training.step_model_array, the same core as training.estimate.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._arguments import as_cluster, divisors
from . import flops, memory, memory_recipes, models, planner_recompute, training, validation
from .efficiency import OVERLAP_SLOWDOWN, fp8_scaling_name
from .errors import ConfigurationError
from ._arguments import flag, whole_number
from .mesh import MAX_WORLD_SIZE
from .step import pricing
from .step.checks import check_fp8_attention
from .step.data_parallel import zero3_collectives_per_layer
from .step.terms import TERMS
from .tp_overlap import planner_codes, tp_overlap_method
from .units import non_negative, positive_int

__all__ = [
    "COLUMNS",
    "CP_MIN_CHUNK",
    "COMPONENTS",
    "DecidingAssumption",
    "Plan",
    "enumerate_configurations",
    "error_band_percent",
    "plan",
]

COLUMNS = (
    "dp",
    "tp",
    "pp",
    "chunks",
    "micro_batch_size",
    "zero",
    "recompute_code",
    "sequence_parallel",
    "schedule_code",
    "cp",
)
#: The columns an MoE model's plan adds (Lesson 10 §6).
MOE_COLUMNS = ("ep", "etp")
#: Context parallelism is searched only while each GPU keeps at least this many tokens of a sequence: below it
#: the attention on a chunk no longer hides the ring's K/V traffic on a fabric (production.ring_attention_step's
#: crossover is a few thousand tokens per GPU on InfiniBand NDR; Lesson 8 §4).
CP_MIN_CHUNK = 4096


@dataclass(frozen=True)
class Plan:
    """Every evaluated configuration as NumPy columns, ranked (feasible first, then by step time)."""

    columns: dict
    results: dict
    feasible: np.ndarray
    order: np.ndarray
    rejected: dict
    gpus: int
    model_name: str
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.order.size)

    @property
    def feasible_count(self) -> int:
        return int(self.feasible.sum())

    @property
    def band_percent(self) -> float:
        """The error band (%) two configurations of this plan tie within: validation.error_band of the plan's GPU
        and precision (the mean |step-time error| on published runs like these), else error_band_percent()."""
        band = self.extra.get("band")
        return error_band_percent() if band is None else float(band.percent)

    def row(self, rank: int) -> dict:
        """The configuration at position `rank` of the ranking, as plain numbers."""
        i = int(self.order[rank])
        out: dict[str, Any] = {
            name: int(self.columns[name][i]) for name in COLUMNS + MOE_COLUMNS if name in self.columns
        }
        out["recompute"] = memory.RECOMPUTE_MODES[out.pop("recompute_code")]
        out["schedule"] = training.SCHEDULES[out.pop("schedule_code")]
        out["sequence_parallel"] = bool(out["sequence_parallel"])
        out["microbatches"] = int(self.results["microbatches"][i])
        out["step_time_s"] = float(self.results["step_time_s"][i])
        out["mfu"] = float(self.results["mfu"][i])
        out["memory_per_gpu_bytes"] = float(self.results["memory_bytes"][i])
        out["fits"] = bool(self.feasible[i])
        if "recompute_layers" in self.columns:  # plan(partial_recompute=True)
            n = int(self.columns["recompute_layers"][i])
            out["recompute_layers"] = None if n == planner_recompute.NOT_PARTIAL else n
        return out

    def top(self, k: int = 10) -> list[dict]:
        return [self.row(r) for r in range(min(k, len(self)))]

    def pareto_front(self) -> list[dict]:
        """Feasible configurations not beaten on both step time and memory per GPU, fastest first."""
        idx = np.flatnonzero(self.feasible)
        if idx.size == 0:
            return []
        t = self.results["step_time_s"][idx]
        mem = self.results["memory_bytes"][idx]
        by_time = idx[np.lexsort((mem, t))]
        front, best_mem = [], np.inf
        for i in by_time:
            if self.results["memory_bytes"][i] < best_mem:
                best_mem = self.results["memory_bytes"][i]
                front.append(i)
        position = {int(i): r for r, i in enumerate(self.order)}
        return [self.row(position[int(i)]) for i in front]

    def table(self, k: int = 10, ties: bool = False) -> str:
        """The first k rows of the ranking. ties=True adds a first column '≈' marking the feasible rows whose step
        time lies within the model's error band of the fastest's (tie_count(0) of them; band_percent)."""
        mark = ties
        tied = self.tie_count(0) if mark and self.feasible_count else 0
        experts = "ep" in self.columns
        lines = [
            ("≈ " if mark else "")
            + f"{'dp':>4} {'tp':>3} {'cp':>3} {'pp':>3} "
            + (f"{'ep':>3} {'etp':>3} " if experts else "")
            + f"{'v':>2} {'mbs':>4} {'m':>5} {'zero':>4} {'recompute':>9} "
            f"{'sp':>3} {'step':>9} {'MFU':>6} {'mem/GPU':>9} fits"
        ]
        from .units import format_bytes, format_seconds

        for rank, r in enumerate(self.top(k)):
            lines.append(
                ("" if not mark else "≈ " if rank < tied else "  ")
                + f"{r['dp']:>4} {r['tp']:>3} {r['cp']:>3} {r['pp']:>3} "
                + (f"{r['ep']:>3} {r['etp']:>3} " if experts else "")
                + f"{r['chunks']:>2} {r['micro_batch_size']:>4} "
                f"{r['microbatches']:>5} {r['zero']:>4} {_recompute_text(r):>9} {'yes' if r['sequence_parallel'] else 'no':>3} "
                f"{format_seconds(r['step_time_s']):>9} {100 * r['mfu']:5.1f}% {format_bytes(r['memory_per_gpu_bytes']):>9} "
                f"{'yes' if r['fits'] else 'NO'}"
            )
        return "\n".join(lines)

    def _rank(self, rank, name: str = "rank") -> int:
        return whole_number(rank, name, 0, len(self) - 1)

    def _feasible_rank(self, rank, name: str = "rank") -> int:
        if self.feasible_count == 0:
            raise ConfigurationError(f"no configuration of {self.model_name} on {self.gpus} GPUs fits, so none ties")
        return whole_number(rank, f"{name} (a feasible row)", 0, self.feasible_count - 1)

    def _tie_range(self, rank: int, band_percent) -> tuple[int, int]:
        band = self.band_percent if band_percent is None else non_negative(band_percent, "", "band_percent")
        # feasible rows come first, sorted by step time: the ties of a row are one contiguous run of ranks
        times = self.results["step_time_s"][self.order[: self.feasible_count]]
        t = times[rank]
        within = np.flatnonzero(np.abs(times - t) <= band / 100.0 * t)  # contiguous: times are sorted
        return int(within[0]), int(within[-1]) + 1

    def tie_count(self, rank=0, band_percent=None) -> int:
        """How many feasible configurations (the row itself included) lie within the error band of row `rank`'s
        step time: |t - t_rank| <= band / 100 x t_rank (band: the plan's band_percent, or band_percent).
        Lesson 7 §8."""
        lo, hi = self._tie_range(self._feasible_rank(rank), band_percent)
        return hi - lo

    def ties(self, rank=0, band_percent=None, k=None) -> list[dict]:
        """The feasible configurations whose step time lies within the model's error band of row `rank`'s,
        |t - t_rank| <= band / 100 x t_rank, in rank order (the row itself included; at most k of them).
        The model cannot tell them apart: their order is decided by an assumption (deciding_assumption),
        not by the data. band: the plan's band_percent (validation.error_band of its GPU and precision: the
        mean |step-time error| on published runs like these), or band_percent. Lesson 7 §8.

        >>> p = plan('llama2-7b', 'dgx-h100', nodes=2, global_batch=64)
        >>> ties = p.ties(0)  # the fastest and every feasible row within the band of it: a prefix of the ranking
        >>> ties == p.top(len(ties)) and len(ties) == p.tie_count(0)
        True
        """
        lo, hi = self._tie_range(self._feasible_rank(rank), band_percent)
        if k is not None:
            hi = min(hi, lo + whole_number(k, "k", 0, len(self)))
        return [self.row(r) for r in range(lo, hi)]

    def deciding_assumption(self, a=0, b=1) -> "DecidingAssumption":
        """Which modelling assumption decides between the configurations ranked a and b: of their step-time
        components (COMPONENTS; differences b minus a, summing to the step-time difference) and the
        data-parallel traffic the model prices as hidden behind compute (dp_comm - dp_exposed: in the
        step time only as its overlap slowdown, so the rest, 1 - OVERLAP_SLOWDOWN of it with the calibrated model,
        all of it with a fixed efficiency, is at stake if the overlap assumption fails), the one whose difference is the
        largest in size, with the assumption behind it. Lesson 7 §8.

        >>> p = plan('llama2-7b', 'dgx-h100', nodes=2, global_batch=64)
        >>> d = p.deciding_assumption(0, 1)
        >>> abs(sum(d.differences_s.values()) - d.step_time_difference_s) < 1e-12  # step time = sum of components
        True
        """
        ia, ib = (int(self.order[self._rank(r, n)]) for r, n in ((a, "a"), (b, "b")))
        res = self.results
        diffs = {name: float(res[key][ib] - res[key][ia]) for key, (name, _) in COMPONENTS.items() if key in res}
        hidden = [float(res["dp_comm_s"][i] - res["dp_exposed_s"][i]) for i in (ia, ib)]
        # the step time already holds the compute model's overlap slowdown of the hidden traffic (the calibrated
        # model's OVERLAP_SLOWDOWN; none with a fixed efficiency): at stake beyond it, the rest, were it exposed
        held = self.extra.get("overlap_slowdown", OVERLAP_SLOWDOWN[1])
        at_stake = {**diffs, HIDDEN_DP[0]: (1.0 - held) * (hidden[1] - hidden[0])}
        name = max(at_stake, key=lambda c: abs(at_stake[c]))
        assumption = dict((*COMPONENTS.values(), HIDDEN_DP))[name]
        if name == "compute" and self.extra.get("calibrated") is False:
            assumption = FIXED_COMPUTE_ASSUMPTION
        return DecidingAssumption(
            component=name,
            assumption=assumption,
            difference_s=at_stake[name],
            step_time_difference_s=float(res["step_time_s"][ib] - res["step_time_s"][ia]),
            differences_s=diffs,
            hidden_dp_s=(hidden[0], hidden[1]),
            memory_difference_bytes=float(res["memory_bytes"][ib] - res["memory_bytes"][ia]),
        )

    def summary(self) -> str:
        rejected = ", ".join(f"{n} {why}" for why, n in self.rejected.items() if n)
        return (
            f"{len(self)} configurations of {self.model_name} on {self.gpus} GPUs evaluated, "
            f"{self.feasible_count} fit in memory" + (f";\n    not evaluated: {rejected}" if rejected else "")
        )


def _recompute_text(row: dict) -> str:
    """A row's recomputation as the table shows it: the mode, or 'full:N' with N layers of each chunk recomputed."""
    n = row.get("recompute_layers")
    return row["recompute"] if n is None else f"{row['recompute']}:{n}"


#: The step-time components of Plan.results (training.step_model_array): the terms of distlab.step.TERMS, each with
#: its label and the modelling assumption that prices it (Lesson 7 §1-§3, §8). deciding_assumption names the one that
#: separates two rows most.
COMPONENTS = {t.key: (t.label, t.assumption) for t in TERMS}
#: The data-parallel traffic the step model prices as hidden behind compute (dp_comm_s - dp_exposed_s): in the step
#: time only as its overlap slowdown (efficiency.OVERLAP_SLOWDOWN of it), so its size says how much rests on the
#: overlap assumption (all of it, were the traffic exposed).
HIDDEN_DP = ("DP communication priced as hidden", COMPONENTS["dp_exposed_s"][1])
FIXED_COMPUTE_ASSUMPTION = (
    "the fixed matmul efficiency (every FLOP at one share of peak; efficiency=None calibrates it)"
)


@dataclass(frozen=True)
class DecidingAssumption:
    """Plan.deciding_assumption's answer: the component separating two configurations most, its assumption,
    its difference (second minus first, s), the step-time difference, every step-time component's difference,
    the DP traffic each prices as hidden (first, second; s), and the difference in memory per GPU (bytes)."""

    component: str
    assumption: str
    difference_s: float
    step_time_difference_s: float
    differences_s: dict
    hidden_dp_s: tuple
    memory_difference_bytes: float

    def text(self) -> str:
        from .units import format_bytes, format_seconds, wrap_text

        sign = "+" if self.difference_s >= 0 else "-"
        more = "more" if self.memory_difference_bytes >= 0 else "less"
        return wrap_text(
            f"{self.component} differs most ({sign}{format_seconds(abs(self.difference_s))}, second minus first); "
            f"it rests on: {self.assumption}. The second needs "
            f"{format_bytes(abs(self.memory_difference_bytes))} {more} memory per GPU"
        )


@functools.lru_cache(maxsize=1)
def error_band_percent() -> float:
    """The step model's error band in %: the mean |step-time error| of training.estimate() out of the box (the
    calibrated compute model) on the validation set of distlab.validation, published runs the model never saw
    and was never fitted to. Two configurations whose predicted step times lie within it of each other are a
    tie. Computed once per process (validation.compare), then cached. Lesson 7 §8.

    >>> from distlab import validation
    >>> error_band_percent() == validation.compare("validation").summary["validation"]["mean_abs_error_percent"]
    True
    """
    from . import validation

    return float(validation.compare("validation").summary["validation"]["mean_abs_error_percent"])


#: Most configurations one plan prices (vectorised, about a second; 64 GPUs of llama2-7b give ~20,000).
MAX_CONFIGURATIONS = 2**20


def enumerate_configurations(
    model, gpus: int, gpus_per_node: int, global_batch: int, seq_len: int | None = None
) -> tuple[dict, dict]:
    """All valid configurations as NumPy columns, and the counts of candidates rejected and why. With seq_len,
    context parallelism cp (a power of two splitting the sequence into 2 cp chunks of >= CP_MIN_CHUNK / 2 tokens)
    is searched too.

    Lesson 7 §5.

    >>> from distlab import models
    >>> columns, rejected = enumerate_configurations(models.model('llama2-7b'), 16, 8, 64)
    >>> len(columns['dp']), rejected['interleaving not possible']
    (10884, 682)
    """
    from .moe import step as moe_step

    model = moe_step.moe_model(model) if moe_step.is_moe(model) else models.model(model)
    gpus = positive_int(gpus, "gpus", high=MAX_WORLD_SIZE)
    gpus_per_node = positive_int(gpus_per_node, "gpus_per_node", high=MAX_WORLD_SIZE)
    global_batch = training.batch_and_sequence(global_batch, 1 if seq_len is None else seq_len)[0]
    seq_len = None if seq_len is None else training.batch_and_sequence(1, seq_len)[1]
    rejected = {"tp not dividing the heads": 0, "batch not divisible by dp": 0, "interleaving not possible": 0}
    layouts, count = [], 0  # (dp, tp, pp, v, b, schedule, cp); each crossed with ZeRO x recompute x SP below
    for tp in divisors(gpus_per_node):
        if model.heads % tp:
            rejected["tp not dividing the heads"] += 1
            continue
        for pp, cp in (
            (pp, cp)
            for pp in (divisors(gpus // tp) if gpus % tp == 0 else [])
            for cp in (1, 2, 4, 8, 16, 32, 64)
            if cp == 1
            or (
                seq_len is not None
                and (gpus // (tp * pp)) % cp == 0
                and seq_len % (2 * cp) == 0
                and seq_len // cp >= CP_MIN_CHUNK
            )
        ):
            if pp > model.layers:
                continue
            dp = gpus // (tp * pp * cp)
            if global_batch % dp:
                rejected["batch not divisible by dp"] += 1
                continue
            for b in divisors(global_batch // dp):
                m = global_batch // (dp * b)
                top = model.layers // pp  # most chunks per stage; v > 1 needs pp > 1 and m a multiple of pp
                interleaves = pp > 1 and m % pp == 0
                if not interleaves:
                    rejected["interleaving not possible"] += top - 1
                for v in range(1, top + 1 if interleaves else 2):
                    schedules = (2,) if v > 1 else ((0, 1) if pp > 1 else (1,))  # gpipe, 1f1b, interleaved
                    for schedule in schedules:
                        layouts.append((dp, tp, pp, v, b, schedule, cp))
                        count += _INNER * (2 if tp > 1 else 1)
            if count > MAX_CONFIGURATIONS:
                raise ConfigurationError(
                    f"{model.name} on {gpus:,} GPUs with global batch {global_batch:,} has more "
                    f"than {MAX_CONFIGURATIONS:,} configurations to price; plan a smaller case"
                )
    if not layouts:
        raise ConfigurationError(
            f"no valid configuration of {model.name} on {gpus} GPUs with global batch {global_batch}"
        )
    return _crossed(np.array(layouts, dtype=np.int64)), rejected


#: ZeRO stages x recomputation codes each layout is crossed with (then x sequence parallelism off/on when tp > 1)
_INNER = 4 * 3


def _crossed(layouts: np.ndarray) -> dict:
    """The columns of every layout row (dp, tp, pp, v, b, schedule, cp) crossed with ZeRO 0-3, recompute code 0-2
    and sequence parallelism (off, and on when tp > 1), in that nesting order (sequence parallelism fastest):
    enumerate_configurations' candidates as contiguous int64 columns. Lesson 7 §5."""
    sp_options = np.where(layouts[:, 1] > 1, 2, 1)
    sizes = _INNER * sp_options
    row = np.repeat(np.arange(len(layouts)), sizes)
    within = np.arange(row.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # position inside the row's block
    n_sp = sp_options[row]
    inner = {"zero": within // (3 * n_sp), "recompute_code": within // n_sp % 3, "sequence_parallel": within % n_sp}
    outer = dict(zip(("dp", "tp", "pp", "chunks", "micro_batch_size", "schedule_code", "cp"), layouts.T))
    return {name: inner[name] if name in inner else outer[name][row] for name in COLUMNS}


def expert_parallel_columns(model, cols: dict, gpus: int, gpus_per_node: int, rejected: dict) -> dict:
    """The dense columns of an MoE model crossed with every (ep, etp): ep a divisor of the routed experts, etp 1 or
    tp (dividing the expert width), etp x ep x pp dividing the GPUs; rows with tp > 1 keep sequence parallelism
    only (Megatron-Core requires it for MoE with TP). Counts what it drops in `rejected`. Lesson 10 §6.

    >>> from distlab import moe
    >>> cols = {name: np.array([value]) for name, value in zip(COLUMNS, (8, 2, 1, 1, 1, 1, 0, 1, 1, 1))}
    >>> out = expert_parallel_columns(moe.model('mixtral-8x7b'), cols, 16, 8, {})
    >>> list(zip(out['ep'].tolist(), out['etp'].tolist()))  # etp x ep x 1 divides 16
    [(1, 1), (2, 1), (4, 1), (8, 1), (1, 2), (2, 2), (4, 2), (8, 2)]
    """
    keep = (cols["tp"] == 1) | (cols["sequence_parallel"] != 0)
    if not keep.all():
        rejected["MoE with tp > 1 without sequence parallelism"] = int((~keep).sum())
        cols = {name: column[keep] for name, column in cols.items()}
    tp, pp = cols["tp"], cols["pp"]
    parts, dropped = [], 0
    for etp_is_tp in (False, True):
        etp = tp if etp_is_tp else np.ones_like(tp)
        for ep in divisors(model.experts):
            ok = (gpus % (etp * ep * pp) == 0) & (model.expert_ffn % etp == 0)
            if etp_is_tp:
                ok &= tp > 1  # with tp = 1 the pair is the etp = 1 row
            dropped += int((~ok).sum())
            idx = np.flatnonzero(ok)
            if idx.size:
                parts.append((idx, ep, etp[idx]))
    rejected["etp x ep x pp not dividing the GPUs"] = dropped
    if not parts:
        raise ConfigurationError(f"no (ep, etp) of {model.name} divides {gpus} GPUs with any pipeline depth")
    index = np.concatenate([idx for idx, _, _ in parts])
    if index.size > MAX_CONFIGURATIONS:
        raise ConfigurationError(
            f"{model.name} on {gpus} GPUs with expert parallelism gives {index.size:,} configurations, "
            f"more than {MAX_CONFIGURATIONS:,} to price; plan a smaller case"
        )
    out = {name: column[index] for name, column in cols.items()}
    out["ep"] = np.concatenate([np.full(idx.size, ep, dtype=np.int64) for idx, ep, _ in parts])
    out["etp"] = np.concatenate([etp for _, _, etp in parts]).astype(np.int64)
    return out


def plan(
    model,
    cluster,
    *,
    global_batch,
    seq_len=None,
    precision="mixed",
    efficiency=None,
    fabric=None,
    nodes=None,
    attention="flash",
    memory_recipe="zero-paper",
    kernels="fused",
    moe_imbalance=1.0,
    capacity_factor=None,
    max_nodes_per_token=None,
    attention_kernel=None,
    fp8_scaling="delayed",
    expert_gemm=None,
    zero3_collectives="layer",
    tp_overlap=None,
    partial_recompute=False,
    fp8_attention=False,
) -> Plan:
    """Evaluate every valid configuration; rank feasible ones first, then by step time.

    efficiency, attention, memory_recipe, kernels, attention_kernel and expert_gemm (None: the engine's), fp8_scaling,
    fp8_attention, zero3_collectives and tp_overlap (None: the engine's default; True: the engine's method where
    sequence parallelism lets it run, tp_overlap.planner_codes) as in training.estimate; only the ZeRO stages the
    memory recipe's engine runs are searched. An MoE model's routing knobs as in estimate, for every candidate, the
    imbalance clipped at min(ep, E / k) (one GPU takes at most every copy). Lesson 7 §5, Lesson 10 §3.

    partial_recompute=True also searches partial-layer recomputation (distlab.partial_recompute; Lesson 7 §1): each
    candidate with recompute 'full' that fits with every layer recomputed is priced instead at the SMALLEST number N of
    layers recomputed per model chunk that still fits (memory falls as N grows, step time rises: the smallest fitting N
    is the fastest), N from 1 (N = 0 is the layout's 'none' row) to the chunk's ceil(L / (pp v)) layers, the same N on
    every stage and chunk: Megatron-LM's `--recompute-method block --recompute-num-layers N` (the first N layers of each
    chunk). Its rows carry recompute_layers (None where every layer is recomputed or recompute is not 'full'; the table
    shows 'full:N'); a 'full' row that does not fit even with every layer recomputed stays as it is. An MoE model's rows
    stay at every layer (modelled for dense models only; distlab.planner_recompute). Activation offloading (estimate's
    activation_offload_layers): not searched, 0.

    >>> p = plan('llama2-7b', 'dgx-h100', nodes=2, global_batch=64)
    >>> p.gpus, len(p.order)  # every configuration enumerate_configurations lists is priced
    (16, 10884)
    """
    from .moe import moe_step_flops, step as moe_step

    partial = flag(partial_recompute, "partial_recompute")
    is_moe = moe_step.is_moe(model)
    model = moe_step.moe_model(model) if is_moe else models.model(model)
    cl = as_cluster(cluster, nodes, fabric)
    batch, s, _ = training.batch_and_sequence(global_batch, seq_len if seq_len is not None else model.seq_len)
    named = dict(kernels=kernels, memory_recipe=memory_recipe, fp8_scaling=fp8_scaling, expert_gemm=expert_gemm)
    named.update(attention_kernel=attention_kernel, fp8_attention=fp8_attention)
    recipe = check_fp8_attention(fp8_attention, memory.precision_recipe(precision))
    compute = pricing.compute_model_for(cl, efficiency, attention, **named)
    hw = training.hardware_arguments(cl, recipe, achieved=compute.calibrated)
    mem_recipe = memory_recipes.memory_recipe(memory_recipe)
    method = tp_overlap_method(tp_overlap, mem_recipe)
    routing = dict(imbalance=moe_imbalance, capacity_factor=capacity_factor, max_nodes=max_nodes_per_token)
    cols, rejected, core_model, moe_columns = _candidates(model, cl, batch, s, mem_recipe, routing)
    options = dict(zero3_tensors=zero3_collectives_per_layer(model, zero3_collectives), **moe_columns)
    options.update(tp_overlap=planner_codes(tp_overlap, mem_recipe, cols["sequence_parallel"]))
    keywords = dict(**hw, global_batch=batch, seq_len=s, **{name: cols[name] for name in COLUMNS})
    keywords.update(**pricing.compute_arguments(compute), memory_recipe=mem_recipe, **options)
    out = training.step_model_array(core_model, **keywords)  # the columns are step_model_array's keywords
    usable = cl.accelerator.memory_bytes - mem_recipe.reserve_bytes
    if partial:  # an MoE model's 'full' rows stay at every layer (planner_recompute)
        out, cols["recompute_layers"] = planner_recompute.fewest_recomputed_layers(core_model, keywords, out, usable)
    # MFU by PaLM's definition (distlab.flops: weights, attention, logits; no recomputation), as estimate()
    counted = moe_step_flops(model, batch, s) if is_moe else flops.step_flops(model, batch, s)
    out["mfu"] = counted.model_flops / (out["step_time_s"] * cl.gpus * hw["peak_flops"])
    fits = out["memory_bytes"] <= usable
    fills = ~((cols["pp"] > 1) & (out["microbatches"] < cols["pp"]))
    feasible = fits & fills
    order = _ranking(out["step_time_s"], feasible)
    band = validation.error_band(cl.accelerator.name, recipe.name, moe=is_moe)
    extra = _extra(compute, fp8_scaling, zero3_collectives, method, is_moe, band=band, partial_recompute=partial)
    return Plan(cols, out, feasible, order, rejected, cl.gpus, model.name, extra)


def _extra(compute, fp8_scaling, zero3_collectives, method: str, is_moe: bool, **more) -> dict:
    """A Plan's record of what it priced with: the compute model's choices, the engine's, and `more`."""
    extra = dict(calibrated=compute.calibrated, overlap_slowdown=compute.overlap_slowdown)
    extra.update(attention_kernel=compute.attention_kernel, fp8_scaling=fp8_scaling_name(fp8_scaling))
    extra.update(expert_gemm=compute.expert_gemm if is_moe else None, fp8_attention=compute.fp8_attention)
    extra.update(zero3_collectives=zero3_collectives, tp_overlap_method=method, **more)
    return extra


def _ranking(step_time: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Row indexes, the feasible ones first, each part by step time, equal times in row order: np.lexsort((step_time,
    ~feasible)), as a sort of each part (the infeasible rows are not sorted with the feasible ones)."""
    parts = (np.flatnonzero(feasible), np.flatnonzero(~feasible))
    return np.concatenate([rows[_stable_argsort(step_time[rows])] for rows in parts])


def _stable_argsort(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable") for a 1-d float array without NaN: NumPy's quicksort (SIMD, about a fifth
    of the stable sort's time here), then each run of equal values put back in index order (a plan's equal step times,
    ~7,000 of Llama-3.1-70B's 52,956 rows, sorted alone)."""
    order = np.argsort(values)
    ordered = values[order]
    tie = np.zeros(ordered.size, dtype=bool)  # True: equal to the value before it
    np.equal(ordered[1:], ordered[:-1], out=tie[1:])
    if tie.any():
        run = np.cumsum(~tie)
        at = np.flatnonzero(tie | np.append(tie[1:], False))  # the positions of every run longer than one
        order[at] = order[at][np.lexsort((order[at], run[at]))]
    return order


def _candidates(model, cl, batch: int, s: int, mem_recipe, routing: dict) -> tuple:
    """(columns, rejected counts, the model as step_model_array reads it, the MoE columns) of plan(): every valid
    layout (enumerate_configurations) whose ZeRO stage the memory recipe's engine runs, with expert parallelism for
    an MoE model (its routing knobs for every candidate); a dense model refuses routing knobs. Lesson 7 §5."""
    from .moe import step as moe_step

    cols, rejected = enumerate_configurations(model, cl.gpus, cl.nvlink_domain, batch, s)
    keep = np.isin(cols["zero"], mem_recipe.zero_stages)
    if not keep.all():
        rejected["ZeRO stage the engine does not run"] = int((~keep).sum())
        cols = {name: column[keep] for name, column in cols.items()}
    if not moe_step.is_moe(model):
        moe_step.refuse_routing_for_dense(model.name, *routing.values())
        return cols, rejected, model, {}
    cols = expert_parallel_columns(model, cols, cl.gpus, cl.nvlink_domain, rejected)
    core_model = moe_step.step_model(model, s, **routing)
    return cols, rejected, core_model, dict(ep=cols["ep"], etp=cols["etp"])
