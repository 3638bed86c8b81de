"""Search every valid parallel configuration of a cluster, evaluated at once with NumPy.

The configurations: dp x tp x pp = GPUs, tp dividing the GPUs of a node and the attention
heads, pp up to the number of layers (uneven splits allowed: the busiest stage has
ceil(L / pp) layers), every micro-batch size dividing a replica's batch,
ZeRO stages 0-3, recomputation none / selective / full, sequence parallelism with tp > 1, and
GPipe or 1F1B, or interleaved 1F1B with every v that splits the layers evenly when the
microbatches are a multiple of pp (Megatron-LM's rule). Each
is priced by distlab.training.step_model_array, the same core as training.estimate.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ._arguments import as_cluster, divisors
from . import flops, memory, models, training
from .errors import ConfigurationError
from .mesh import MAX_WORLD_SIZE
from .units import positive_int

__all__ = [
    "COLUMNS",
    "Plan",
    "enumerate_configurations",
    "plan",
]

COLUMNS = ("dp", "tp", "pp", "chunks", "micro_batch_size", "zero", "recompute_code", "sequence_parallel",
           "schedule_code")


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

    def row(self, rank: int) -> dict:
        """The configuration at position `rank` of the ranking, as plain numbers."""
        i = int(self.order[rank])
        out = {name: int(self.columns[name][i]) for name in COLUMNS}
        out["recompute"] = memory.RECOMPUTE_MODES[out.pop("recompute_code")]
        out["schedule"] = training.SCHEDULES[out.pop("schedule_code")]
        out["sequence_parallel"] = bool(out["sequence_parallel"])
        out["microbatches"] = int(self.results["microbatches"][i])
        out["step_time_s"] = float(self.results["step_time_s"][i])
        out["mfu"] = float(self.results["mfu"][i])
        out["memory_per_gpu_bytes"] = float(self.results["memory_bytes"][i])
        out["fits"] = bool(self.feasible[i])
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

    def table(self, k: int = 10) -> str:
        lines = [f"{'dp':>4} {'tp':>3} {'pp':>3} {'v':>2} {'mbs':>4} {'m':>5} {'zero':>4} {'recompute':>9} {'sp':>3} "
                 f"{'step':>9} {'MFU':>6} {'mem/GPU':>9} fits"]
        from .units import format_bytes, format_seconds

        for r in self.top(k):
            lines.append(f"{r['dp']:>4} {r['tp']:>3} {r['pp']:>3} {r['chunks']:>2} {r['micro_batch_size']:>4} "
                         f"{r['microbatches']:>5} {r['zero']:>4} {r['recompute']:>9} {'yes' if r['sequence_parallel'] else 'no':>3} "
                         f"{format_seconds(r['step_time_s']):>9} {100 * r['mfu']:5.1f}% {format_bytes(r['memory_per_gpu_bytes']):>9} "
                         f"{'yes' if r['fits'] else 'NO'}")
        return "\n".join(lines)

    def summary(self) -> str:
        rejected = ", ".join(f"{n} {why}" for why, n in self.rejected.items() if n)
        return (f"{len(self)} configurations of {self.model_name} on {self.gpus} GPUs evaluated, "
                f"{self.feasible_count} fit in memory" + (f"; not evaluated: {rejected}" if rejected else ""))


#: Most configurations one plan prices (vectorised, about a second; 64 GPUs of llama2-7b give ~20,000).
MAX_CONFIGURATIONS = 2**20


def enumerate_configurations(model, gpus: int, gpus_per_node: int, global_batch: int) -> tuple[dict, dict]:
    """All valid configurations as NumPy columns, and the counts of candidates rejected and why.

    Lesson 7 §5.

    >>> from distlab import models
    >>> columns, rejected = enumerate_configurations(models.model('llama2-7b'), 16, 8, 64)
    >>> len(columns['dp']), rejected['interleaving not possible']
    (5388, 935)
    """
    model = models.model(model)
    gpus = positive_int(gpus, "gpus", high=MAX_WORLD_SIZE)
    gpus_per_node = positive_int(gpus_per_node, "gpus_per_node", high=MAX_WORLD_SIZE)
    global_batch = training.batch_and_sequence(global_batch, 1)[0]
    rejected = {"tp not dividing the heads": 0, "batch not divisible by dp": 0, "interleaving not possible": 0}
    rows = []
    for tp in divisors(gpus_per_node):
        if model.heads % tp:
            rejected["tp not dividing the heads"] += 1
            continue
        for pp in divisors(gpus // tp) if gpus % tp == 0 else []:
            if pp > model.layers:
                continue
            dp = gpus // (tp * pp)
            if global_batch % dp:
                rejected["batch not divisible by dp"] += 1
                continue
            for b in divisors(global_batch // dp):
                m = global_batch // (dp * b)
                for v in range(1, model.layers // pp + 1):
                    if v > 1 and (pp == 1 or model.layers % (pp * v) or m % pp):
                        rejected["interleaving not possible"] += 1
                        continue
                    schedules = (2,) if v > 1 else ((0, 1) if pp > 1 else (1,))  # gpipe, 1f1b, interleaved
                    for schedule, zero, code, sp in itertools.product(schedules, range(4), range(3),
                                                                      (False, True) if tp > 1 else (False,)):
                        rows.append((dp, tp, pp, v, b, zero, code, sp, schedule))
            if len(rows) > MAX_CONFIGURATIONS:
                raise ConfigurationError(f"{model.name} on {gpus:,} GPUs with global batch {global_batch:,} has more "
                                         f"than {MAX_CONFIGURATIONS:,} configurations to price; plan a smaller case")
    if not rows:
        raise ConfigurationError(f"no valid configuration of {model.name} on {gpus} GPUs with global batch {global_batch}")
    data = np.array(rows, dtype=np.int64)
    return {name: data[:, i] for i, name in enumerate(COLUMNS)}, rejected


def plan(model, cluster, *, global_batch, seq_len=None, precision="mixed", efficiency=0.5, fabric=None,
         nodes=None) -> Plan:
    """Evaluate every valid configuration; rank feasible ones first, then by step time.

    Lesson 7 §5 (search every valid configuration).

    >>> p = plan('llama2-7b', 'dgx-h100', nodes=2, global_batch=64)
    >>> p.gpus, len(p.order)  # every configuration enumerate_configurations lists is priced
    (16, 5388)
    """
    model = models.model(model)
    cl = as_cluster(cluster, nodes, fabric)
    batch, s, _ = training.batch_and_sequence(global_batch, seq_len if seq_len is not None else model.seq_len)
    eff = training.check_fraction(efficiency, "efficiency")
    recipe = memory.precision_recipe(precision)
    hw = training.hardware_arguments(cl, recipe)
    peak = hw["peak_flops"]
    cols, rejected = enumerate_configurations(model, cl.gpus, cl.node.gpus_per_node, batch)
    out = training.step_model_array(
        model, **hw, global_batch=batch, seq_len=s,
        dp=cols["dp"], tp=cols["tp"], pp=cols["pp"], chunks=cols["chunks"], micro_batch_size=cols["micro_batch_size"],
        zero=cols["zero"], recompute_code=cols["recompute_code"], sequence_parallel=cols["sequence_parallel"],
        schedule_code=cols["schedule_code"], efficiency=eff)
    # MFU by PaLM's definition (distlab.flops: weights, attention, logits; no recomputation), as estimate()
    out["mfu"] = flops.step_flops(model, batch, s).model_flops / (out["step_time_s"] * cl.gpus * peak)
    fits = out["memory_bytes"] <= cl.accelerator.memory_bytes
    fills = ~((cols["pp"] > 1) & (out["microbatches"] < cols["pp"]))
    feasible = fits & fills
    order = np.lexsort((out["step_time_s"], ~feasible))
    return Plan(columns=cols, results=out, feasible=feasible, order=order, rejected=rejected, gpus=cl.gpus,
                model_name=model.name)
