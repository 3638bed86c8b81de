"""Lesson 7 app: the full training calculator (model, cluster, fabric, batch, configuration ->
memory per GPU, step-time breakdown, MFU, throughput, and why a configuration does not fit)."""

from __future__ import annotations

from typing import TypeGuard

import ipywidgets as widgets

from .. import hardware, memory, memory_recipes, models, moe, training, triage, validation
from ..moe import step as moe_step
from ..errors import ConfigurationError, DistlabError
from ..plots.memory_wall import COMPONENTS as MEMORY_COMPONENTS, LABELS as MEMORY_LABELS
from ..plots.training_lab import PARTS as STEP_PARTS
from ..units import format_bytes, format_seconds
from .browser import LabPicture
from .common import (
    LessonApp,
    OptionalDropdown,
    attempt,
    event_loop_running,
    fill_order,
    fill_positions,
    offered,
    remembered,
    remembered_estimate,
    replace_options,
)

__all__ = [
    "FABRICS",
    "NODE_COUNTS",
    "PENDING",
    "BATCHES",
    "SEQS",
    "TP_SIZES",
    "PP_SIZES",
    "CP_SIZES",
    "MICRO_BATCHES",
    "CHUNKS",
    "ZERO_LABELS",
    "EP_SIZES",
    "ETP_OPTIONS",
    "IMBALANCES",
    "CAPACITY_OPTIONS",
    "TrainingLabApp",
    "APPS",
]

FABRICS = ["ethernet-100g", "ethernet-200g", "ethernet-400g", "ib-hdr", "ib-ndr", "ib-xdr"]
NODE_COUNTS = [1, 2, 4, 8, 16, 32, 64, 128]
BATCHES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
SEQS = [1024, 2048, 4096, 8192, 16384]
#: The compute model: the calibrated one (distlab.efficiency, Lesson 7 §8) or a fixed share of peak (§1).
EFFICIENCY_OPTIONS = [("calibrated", None)] + [(f"fixed {p}%", p / 100) for p in (30, 40, 50, 60, 70, 80)]
#: The text under the picture at a node count still being priced (in a kernel, for a moment after a change).
PENDING = "pricing this node count ..."
#: The memory axis reaches at most this many times the GPU's capacity.
MEMORY_AXIS = 2
TP_SIZES = [1, 2, 4, 8]
PP_SIZES = [1, 2, 4, 8, 16]
CP_SIZES = [1, 2, 4, 8, 16]
MICRO_BATCHES = [1, 2, 4, 8]
CHUNKS = [1, 2, 4, 5, 10, 20]
ZERO_LABELS = [("plain DP", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)]
#: Expert parallelism of the mixture-of-experts models (distlab.moe; Lesson 10): EP sizes, and expert TP either
#: the attention's TP (Megatron's default) or none.
EP_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
ETP_OPTIONS = [("= TP", None), ("1", 1)]
#: The routing knobs of an MoE model (training.estimate's moe_imbalance and capacity_factor; Lesson 10 §3): the
#: busiest EP rank's token copies over the mean (offered up to min(ep, experts / top_k), its bound), and either
#: dropless routing or expert buffers padded to a capacity factor (GShard's; the imbalance then does not apply).
IMBALANCES = [1.0, 1.1, 1.25, 1.5, 2.0]
CAPACITY_OPTIONS = [("dropless", None), ("1.0", 1.0), ("1.25", 1.25), ("1.5", 1.5), ("2.0", 2.0)]


#: The lab's fixes for a configuration that does not fit, remembered per configuration (widgets.common.remembered;
#: its estimates go through common.remembered_estimate): a configuration visited again is not priced again.
_explain_infeasible = remembered(64)(triage.explain_infeasible)


def _check_offered(**values) -> None:
    """Our error naming the first argument whose value the lab's controls do not offer (common.offered)."""
    for name, options in (
        ("model", list(models.MODELS) + list(moe.MOE_MODELS)),
        ("node", list(hardware.NODES)),
        ("nodes", NODE_COUNTS),
        ("fabric", FABRICS),
        ("global_batch", BATCHES),
        ("seq_len", SEQS),
        ("tp", TP_SIZES),
        ("pp", PP_SIZES),
        ("cp", CP_SIZES),
        ("micro_batch_size", MICRO_BATCHES),
        ("chunks", CHUNKS),
        ("schedule", list(training.SCHEDULES)),
        ("zero", ZERO_LABELS),
        ("recompute", list(memory.RECOMPUTE_MODES)),
        ("efficiency", EFFICIENCY_OPTIONS),
        ("memory_recipe", list(memory_recipes.MEMORY_RECIPES)),
        ("ep", EP_SIZES),
        ("etp", ETP_OPTIONS),
        ("moe_imbalance", IMBALANCES),
        ("capacity_factor", CAPACITY_OPTIONS),
    ):
        offered(values[name], name, options)


class TrainingLabApp(LessonApp):
    """The training calculator: every number from distlab.training.estimate (and triage.explain_infeasible).

    `result` holds the current StepEstimate (None on invalid input); `error` the message shown
    instead (None when valid). The data-parallel degree is GPUs / (tp x pp); the micro-batch
    size gives the microbatches per pipeline, m = global batch / (dp x micro-batch size).

    The bars are drawn in the browser (distlab.widgets.browser.LabPicture): memory per GPU against the GPU's
    capacity and the step-time breakdown, sent for every node count of the picture's own slider (`nodes`) at
    once with the text of each, so moving it needs no kernel round trip. The other controls change the physics:
    the current count answers first, the others are filled in the kernel's later turns (common.fill_positions).
    """

    summary_in_picture = True

    def __init__(
        self,
        model="llama3.1-70b",
        node="dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        tp=4,
        pp=2,
        micro_batch_size=1,
        chunks=1,
        schedule="1f1b",
        zero=2,
        recompute="selective",
        sequence_parallel=True,
        efficiency=None,
        memory_recipe="deepspeed",
        cp=1,
        ep=1,
        etp=None,
        moe_imbalance=1.0,
        capacity_factor=None,
    ):
        _check_offered(
            model=model, node=node, nodes=nodes, fabric=fabric, global_batch=global_batch, seq_len=seq_len, tp=tp,
            pp=pp, cp=cp, micro_batch_size=micro_batch_size, chunks=chunks, schedule=schedule, zero=zero,
            recompute=recompute, efficiency=efficiency, memory_recipe=memory_recipe, ep=ep, etp=etp,
            moe_imbalance=moe_imbalance, capacity_factor=capacity_factor,
        )  # fmt: skip
        self._make_controls(
            model=model, node=node, nodes=nodes, fabric=fabric, global_batch=global_batch, seq_len=seq_len, tp=tp,
            pp=pp, cp=cp, micro_batch_size=micro_batch_size, chunks=chunks, schedule=schedule, zero=zero,
            recompute=recompute, sequence_parallel=sequence_parallel, efficiency=efficiency,
            memory_recipe=memory_recipe, ep=ep, etp=etp, moe_imbalance=moe_imbalance, capacity_factor=capacity_factor,
        )  # fmt: skip
        self.status = widgets.HTML()
        # the batch the student chose (the dropdown's value may be larger at a node count that does not offer it:
        # batch_at); every count is priced from this one, so moving the slider and back gives the same numbers
        self._chosen_batch = global_batch
        self.result: training.StepEstimate | None = None
        self.error: str | None = None
        self._results: dict = {}  # node count -> StepEstimate or DistlabError, for the current other controls
        self._texts: dict = {}  # node count -> the text under the picture there
        for control in self._controls:
            control.observe(self._on_change, names="value")
        super().__init__([self._layout(), self.picture, self.status])
        self._syncing = False
        if moe_imbalance not in self.valid_imbalances():
            raise ConfigurationError(
                f"moe_imbalance={moe_imbalance!r} is more than the busiest of ep={ep} ranks can take with "
                f"{model}'s routing; valid: " + ", ".join(f"{v:g}" for v in self.valid_imbalances())
            )
        self._sync_controls()
        self._refresh()
        self.picture.observe(self._on_nodes, names="value")

    def _make_controls(self, **v) -> None:
        """The controls at the values `v` (__init__'s arguments), and the picture whose own slider is the node count:
        the model, the cluster, the batch and the parallel layout here, the rest in _make_memory_controls."""
        narrow = widgets.Layout(width="210px")
        # the dense catalog, then the mixture-of-experts one (distlab.moe, Lesson 10)
        self.model = widgets.Dropdown(
            options=list(models.MODELS) + list(moe.MOE_MODELS), value=v["model"], description="model", layout=narrow
        )
        self.node = widgets.Dropdown(options=list(hardware.NODES), value=v["node"], description="node", layout=narrow)
        # the node count is the picture's own slider, in the browser: every count's bars and text are sent at once
        self.picture = LabPicture(description="nodes", width=720, height=250)
        self.picture.show_options(NODE_COUNTS, [""] * len(NODE_COUNTS), value=v["nodes"])
        self.nodes = self.picture
        self.fabric = widgets.Dropdown(options=FABRICS, value=v["fabric"], description="fabric", layout=narrow)
        self.global_batch = widgets.Dropdown(
            options=BATCHES, value=v["global_batch"], description="batch", layout=narrow
        )
        self.seq_len = widgets.Dropdown(options=SEQS, value=v["seq_len"], description="sequence", layout=narrow)
        self.tp = widgets.ToggleButtons(
            options=TP_SIZES, value=v["tp"], description="TP", style={"button_width": "40px"}
        )
        self.pp = widgets.ToggleButtons(
            options=PP_SIZES, value=v["pp"], description="PP", style={"button_width": "40px"}
        )
        # context parallelism by ring attention (training.estimate's cp): each GPU holds s / cp of a sequence
        self.cp = widgets.Dropdown(options=CP_SIZES, value=v["cp"], description="CP", layout=narrow)
        self.micro_batch_size = widgets.Dropdown(
            options=MICRO_BATCHES, value=v["micro_batch_size"], description="micro-batch", layout=narrow
        )
        self.schedule = widgets.Dropdown(
            options=list(training.SCHEDULES), value=v["schedule"], description="schedule", layout=narrow
        )
        self.chunks = widgets.Dropdown(options=CHUNKS, value=v["chunks"], description="chunks v", layout=narrow)
        self._make_memory_controls(narrow, **v)

    def _make_memory_controls(self, narrow, **v) -> None:
        """The controls of memory, compute model and expert routing at the values `v`, and the tuple of every control
        the physics reads (_controls)."""
        self.zero = widgets.ToggleButtons(
            options=ZERO_LABELS, value=v["zero"], description="sharding", style={"button_width": "70px"}
        )
        self.recompute = widgets.Dropdown(
            options=list(memory.RECOMPUTE_MODES), value=v["recompute"], description="recompute", layout=narrow
        )
        self.sequence_parallel = widgets.Checkbox(
            value=v["sequence_parallel"], description="sequence parallel", layout=narrow
        )
        # None: the calibrated compute model (distlab.efficiency, Lesson 7 §8); a number: Lesson 7 §1's fixed share
        self.efficiency = OptionalDropdown(
            options=EFFICIENCY_OPTIONS, value=v["efficiency"], description="compute", layout=narrow
        )
        # an engine's memory, not the ZeRO paper's minimum: DeepSpeed runs every ZeRO stage (distlab.memory_recipes)
        self.memory_recipe = widgets.Dropdown(
            options=list(memory_recipes.MEMORY_RECIPES), value=v["memory_recipe"], description="memory", layout=narrow
        )
        # expert parallelism (MoE models only): experts over ep GPUs, each expert's matrices over etp
        self.ep = widgets.Dropdown(options=EP_SIZES, value=v["ep"], description="EP", layout=narrow)
        self.etp = OptionalDropdown(options=ETP_OPTIONS, value=v["etp"], description="expert TP", layout=narrow)
        # routing (MoE models only): load imbalance across EP ranks, or a capacity factor (Lesson 10 §3)
        self.moe_imbalance = widgets.Dropdown(
            options=IMBALANCES, value=v["moe_imbalance"], description="imbalance", layout=narrow
        )
        self.capacity_factor = OptionalDropdown(
            options=CAPACITY_OPTIONS, value=v["capacity_factor"], description="capacity", layout=narrow
        )
        self._controls = (
            self.model,
            self.node,
            self.fabric,
            self.global_batch,
            self.seq_len,
            self.tp,
            self.pp,
            self.micro_batch_size,
            self.schedule,
            self.chunks,
            self.zero,
            self.recompute,
            self.sequence_parallel,
            self.efficiency,
            self.memory_recipe,
            self.cp,
            self.ep,
            self.etp,
            self.moe_imbalance,
            self.capacity_factor,
        )

    def _layout(self) -> widgets.VBox:
        """The controls, in rows: model and cluster, batch, the parallel layout, memory and routing."""
        return widgets.VBox(
            [
                widgets.HBox([self.model, self.node]),
                widgets.HBox([self.fabric, self.global_batch, self.seq_len]),
                self.tp,
                self.pp,
                widgets.HBox([self.micro_batch_size, self.schedule, self.chunks]),
                self.zero,
                widgets.HBox([self.recompute, self.sequence_parallel, self.efficiency]),
                widgets.HBox([self.memory_recipe, self.cp]),
                widgets.HBox([self.ep, self.etp]),
                widgets.HBox([self.moe_imbalance, self.capacity_factor]),
            ]
        )

    def valid_batches(self, nodes: int | None = None) -> list:
        """The global batches the batch dropdown offers at `nodes` (default: the slider's): multiples of dp x
        micro-batch (each replica gets whole microbatches), dp = GPUs / (tp x cp x pp); the smallest such multiple
        when no listed batch is one."""
        nodes = self.nodes.value if nodes is None else nodes
        gpus = hardware.node(self.node.value).gpus_per_node * nodes
        step = max(1, gpus // (self.tp.value * self.cp.value * self.pp.value)) * self.micro_batch_size.value
        return [b for b in BATCHES if b % step == 0] or [step]

    def valid_imbalances(self) -> list:
        """The load imbalances the imbalance dropdown offers: IMBALANCES up to min(ep, experts / top_k), the most the
        busiest of ep ranks can take (distlab.moe.step; with ep = 1 only 1); every one for a dense model."""
        if not moe_step.is_moe(self.model.value):
            return list(IMBALANCES)
        m = moe.model(self.model.value)
        high = min(float(self.ep.value), m.experts / m.top_k)
        return [v for v in IMBALANCES if v <= high]

    def batch_at(self, nodes: int) -> int:
        """The global batch the lab uses at `nodes`: the batch the student chose when that count offers it, else
        the next larger one it offers (what the batch dropdown shows when the slider goes there). It depends on the
        chosen batch only, not on where the slider has been: moving to 128 nodes and back keeps the numbers."""
        batches = self.valid_batches(nodes)
        return min((b for b in batches if b >= self._chosen_batch), default=batches[-1])

    def _sync_controls(self) -> None:
        """Enable what applies (chunks: interleaved only; sequence parallelism: tp > 1), offer valid batches."""
        self.chunks.disabled = self.schedule.value != "interleaved"
        self.sequence_parallel.disabled = self.tp.value == 1
        moe = moe_step.is_moe(self.model.value)
        self.ep.disabled = self.etp.disabled = self.capacity_factor.disabled = not moe
        imbalances = self.valid_imbalances()
        if list(self.moe_imbalance.options) != imbalances:
            keep = max(v for v in imbalances if v <= self.moe_imbalance.value)
            replace_options(self, self.moe_imbalance, imbalances, keep)
        # the imbalance applies to dropless routing (a capacity factor pads every expert's buffer to it instead)
        self.moe_imbalance.disabled = not moe or self.capacity_factor.value is not None or len(imbalances) == 1
        batches = self.valid_batches()
        if list(self.global_batch.options) != batches:
            replace_options(self, self.global_batch, batches, self.batch_at(self.nodes.value))

    def _on_change(self, change=None):
        if self._syncing:
            return
        if change is not None and change.get("owner") is self.global_batch:
            self._chosen_batch = change["new"]
        self._sync_controls()
        self._refresh()

    def _on_nodes(self, change=None):
        """The slider moved (in the browser, which has drawn it already): the batch dropdown follows (batch_at);
        nothing is priced again, as every count was priced with its batch_at."""
        if self._syncing:
            return
        self._sync_controls()
        self.update()

    _syncing = False
    _generation = 0
    #: The background filling of the other node counts in a kernel (an asyncio.Future; None when done at once).
    filling = None

    def _refresh(self) -> None:
        """Every node count of the slider for the other controls: the current count first (the others shown as
        PENDING), the others in later turns of the kernel's event loop (at once outside one). A fill the app's own
        cell starts is finished when that cell ends (common.finish_cell_fills), so a saved notebook keeps every
        count (nbconvert, Voila, an export to HTML)."""
        self._generation += 1
        generation = self._generation
        current = self.nodes.value
        self._results, self._texts = {}, {}
        self._price(current)
        if event_loop_running():
            self._send()
        pending = fill_order([n for n in NODE_COUNTS if n != current], current)
        self.filling = fill_positions(pending, self._price, lambda: generation == self._generation, self._send)

    def _price(self, nodes: int) -> None:
        """The estimate and text at `nodes` (our error in place of both on invalid input)."""
        result = attempt(self._estimate, nodes)
        self._results[nodes] = result
        if not isinstance(result, DistlabError):
            self._texts[nodes] = attempt(self._describe, result, nodes)

    def _send(self) -> None:
        """The bars and text of every node count priced so far to the picture (PENDING where not yet)."""
        results = [self._results.get(n) for n in NODE_COUNTS]
        texts = [self._texts.get(n) for n in NODE_COUNTS]
        valid = [r for r in results if isinstance(r, training.StepEstimate)]
        frames: dict = {}
        if valid:
            acc = hardware.node(self.node.value).accelerator
            reserved = valid[0].memory.reserved_bytes
            step_parts = [p for p in STEP_PARTS if any(p in r.parts() for r in valid)]
            frames = {
                "memory_parts": [MEMORY_LABELS[k] for k in MEMORY_COMPONENTS],
                "memory": [
                    [r.memory.parts()[k] / 1e9 for k in MEMORY_COMPONENTS]
                    if isinstance(r, training.StepEstimate)
                    else []
                    for r in results
                ],
                # the axis holds every count's bar up to MEMORY_AXIS x the capacity (one node of a 70B model on
                # plain DP needs 1 TB: on its scale the capacity line would sit at the floor); taller bars are cut
                "memory_top": min(
                    MEMORY_AXIS * acc.memory_bytes, max([acc.memory_bytes] + [r.memory.total_bytes for r in valid])
                )
                / 1e9,
                "capacity": acc.memory_bytes / 1e9,
                "capacity_label": f"{acc.name}: {format_bytes(acc.memory_bytes)}",
                # what the verdict compares with: the capacity less the recipe's reserve (CUDA context, NCCL
                # buffers; distlab.memory_recipes), drawn as its own line so that a bar between the two reads "over"
                "usable": (acc.memory_bytes - reserved) / 1e9 if reserved else None,
                "usable_label": f"usable: {format_bytes(acc.memory_bytes - reserved)} "
                f"({format_bytes(reserved)} reserved)",
                "step_parts": step_parts,
                # no step-time bar for a layout that cannot run (over memory, or a pipeline that never fills): a
                # step it will never take is no answer (issue 31); the picture says so in its place
                "step": [[r.parts().get(p, 0.0) for p in step_parts] if _runs(r) else [] for r in results],
                "step_text": [
                    [format_seconds(r.parts().get(p, 0.0)) for p in step_parts] if _runs(r) else [] for r in results
                ],
                "step_total": [format_seconds(r.step_time_s) if _runs(r) else "" for r in results],
                "memory_total": [
                    format_bytes(r.memory.total_bytes) if isinstance(r, training.StepEstimate) else "" for r in results
                ],
                "fits": [bool(r.fits) if isinstance(r, training.StepEstimate) else False for r in results],
                "verdict": [_short_verdict(r) if isinstance(r, training.StepEstimate) else "" for r in results],
                # fits but cannot run (a pipeline that never fills): said under the verdict, the reason in the text
                "runs": [bool(r.feasible) if isinstance(r, training.StepEstimate) else False for r in results],
                "gpus": [r.gpus if isinstance(r, training.StepEstimate) else 0 for r in results],
            }
        summaries, errors = [], []
        for r, text in zip(results, texts):
            if r is None:
                summaries.append(PENDING)
                errors.append("")
            elif isinstance(r, DistlabError):
                summaries.append("")
                errors.append(str(r))
            elif isinstance(text, DistlabError):
                summaries.append("")
                errors.append(str(text))
            else:
                summaries.append(text or "")
                errors.append("")
        self._syncing = True
        try:
            self.picture.show_options(NODE_COUNTS, summaries, errors, frames=frames)
        finally:
            self._syncing = False
        self.update()

    def config(self, nodes: int | None = None) -> dict:
        """estimate()'s keyword arguments from the controls (at `nodes`, default the slider's: its batch_at)."""
        interleaved = self.schedule.value == "interleaved"
        return dict(
            global_batch=self.global_batch.value if nodes is None else self.batch_at(nodes),
            seq_len=self.seq_len.value,
            tp=self.tp.value,
            cp=self.cp.value,
            pp=self.pp.value,
            chunks=self.chunks.value if interleaved else 1,
            micro_batch_size=self.micro_batch_size.value,
            zero=self.zero.value,
            recompute=self.recompute.value,
            sequence_parallel=self.sequence_parallel.value,
            schedule=self.schedule.value,
            efficiency=self.efficiency.value,
            memory_recipe=self.memory_recipe.value,
            **(
                dict(
                    ep=self.ep.value,
                    etp=self.etp.value,
                    moe_imbalance=self.moe_imbalance.value,
                    capacity_factor=self.capacity_factor.value,
                )
                if moe_step.is_moe(self.model.value)
                else {}
            ),
        )

    def cluster(self, nodes: int | None = None) -> hardware.Cluster:
        return hardware.cluster(self.node.value, self.nodes.value if nodes is None else nodes, self.fabric.value)

    def _estimate(self, nodes: int) -> training.StepEstimate:
        return remembered_estimate(self.model.value, self.cluster(nodes), **self.config(nodes))

    def compute(self) -> training.StepEstimate:
        """The estimate at the slider's node count (priced by _refresh); raises our error on invalid input."""
        nodes = self.nodes.value
        if nodes not in self._results:
            self._price(nodes)
        result = self._results[nodes]
        if isinstance(result, DistlabError):
            raise result
        return result

    def status_kind(self, est: training.StepEstimate) -> str:
        return "ok" if est.feasible else "bad"

    def describe(self, est: training.StepEstimate) -> str:
        """The text under the picture: configuration, step time, MFU, throughput, fit or why not."""
        nodes = self.nodes.value
        text = self._texts.get(nodes)
        if self._results.get(nodes) is est and isinstance(text, str):
            return text
        return self._describe(est, nodes)

    def _describe(self, est: training.StepEstimate, nodes: int) -> str:
        c = est.config
        head = (
            f"dp={c['dp']} x tp={c['tp']}"
            + (f" x cp={c['cp']}" if c["cp"] > 1 else "")
            + f" x pp={c['pp']}"
            + (f" (v={c['chunks']})" if c["chunks"] > 1 else "")
            + (f", experts over ep={c['ep']} x etp={c['etp']}" if "ep" in c else "")
            + (_routing(c) if "ep" in c else "")
            + f" = {est.gpus} GPUs; global batch {c['global_batch']}: {c['microbatches']} "
            + ("microbatch" if c["microbatches"] == 1 else "microbatches")
            + f" of {c['micro_batch_size']} per pipeline "
            "[training.estimate]"
        )
        parts = ", ".join(f"{name} {format_seconds(value)}" for name, value in est.parts().items() if value > 0)
        lines = [
            head,
            # a layout that cannot run takes no step: its time is what it would take (the picture draws no bar)
            ("step time" if est.feasible else "step time, were it to run,")
            + f" {format_seconds(est.step_time_s)} ({parts})",
            "the model's error band "
            + validation.error_band(self.cluster(nodes).accelerator.name, c["precision"]).short(),
            f"MFU {100 * est.mfu:.1f}%, {est.tokens_per_s:,.0f} tokens/s, {est.samples_per_s:.3g} samples/s; "
            f"scaling efficiency {100 * est.scaling_efficiency:.1f}%",
            f"memory per GPU {format_bytes(est.memory.total_bytes)} ({c['memory_recipe']} recipe): "
            f"{est.memory.verdict()}",
            "compute " + est.compute_model.describe(),
        ]
        if est.feasible:
            return "\n".join(lines)
        lines.append("NOT FEASIBLE: " + est.explain())
        if not est.fits:
            fixes = _explain_infeasible(self.model.value, self.cluster(nodes), **self.config(nodes))
            good = [f for f in fixes if f["fits"]][:3]
            if good:
                lines.append(
                    "would fit: "
                    + "; ".join(
                        f"{f['change']} ({format_bytes(f['memory_per_gpu_bytes'])}, step {format_seconds(f['step_time_s'])})"
                        for f in good
                    )
                    + " [triage.explain_infeasible]"
                )
            elif fixes:
                best = min(fixes, key=lambda f: f["memory_per_gpu_bytes"])
                lines.append(
                    f"no single change fits; the biggest saving: {best['change']} "
                    f"(-{format_bytes(best['saves_bytes'])}) [triage.explain_infeasible]"
                )
        return "\n".join(lines)


def _runs(result) -> TypeGuard[training.StepEstimate]:
    """Whether `result` is an estimate of a layout that runs (fits in memory, no other problem): only such a
    layout gets a step-time bar."""
    return isinstance(result, training.StepEstimate) and bool(result.feasible)


def _routing(c: dict) -> str:
    """How an MoE configuration routes: ' (dropless, busiest EP rank 1.5 x the mean)' or ' (capacity factor 1.25)'."""
    if c.get("capacity_factor") is not None:
        return f" (capacity factor {c['capacity_factor']:g})"
    return f" (dropless, busiest EP rank {c.get('moe_imbalance', 1.0):g} x the mean)"


def _short_verdict(est: training.StepEstimate) -> str:
    """The few words under the memory bar: 'fits, 12.3 GB free' or '40 GB over'."""
    headroom = est.memory.headroom_bytes
    if headroom is None:
        return "fits" if est.fits else "does not fit"
    return f"fits, {format_bytes(headroom)} free" if est.fits else f"{format_bytes(-headroom)} over"


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [TrainingLabApp]
