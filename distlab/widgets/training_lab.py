"""Lesson 7 app: the full training calculator (model, cluster, fabric, batch, configuration ->
memory per GPU, step-time breakdown, MFU, throughput, and why a configuration does not fit)."""

from __future__ import annotations

import ipywidgets as widgets

from .. import hardware, memory, memory_recipes, models, moe, training, triage
from ..moe import step as moe_step
from ..plots.memory_wall import legend_html as memory_legend_html, memory_bars
from ..plots.training_lab import legend_html as step_legend_html, step_bars
from ..units import format_bytes, format_seconds
from .common import BlitRenderer, LessonApp, axes_state, figure_canvas, replace_options

__all__ = [
    "FABRICS",
    "NODE_COUNTS",
    "BATCHES",
    "SEQS",
    "ZERO_LABELS",
    "EP_SIZES",
    "ETP_OPTIONS",
    "TrainingLabApp",
    "APPS",
]

FABRICS = ["ethernet-100g", "ethernet-200g", "ethernet-400g", "ib-hdr", "ib-ndr", "ib-xdr"]
NODE_COUNTS = [1, 2, 4, 8, 16, 32, 64, 128]
BATCHES = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
SEQS = [1024, 2048, 4096, 8192, 16384]
#: The compute model: the calibrated one (distlab.efficiency, Lesson 7 §8) or a fixed share of peak (§1).
EFFICIENCY_OPTIONS = [("calibrated", None)] + [(f"fixed {p}%", p / 100) for p in (30, 40, 50, 60, 70, 80)]
ZERO_LABELS = [("plain DP", 0), ("ZeRO-1", 1), ("ZeRO-2", 2), ("ZeRO-3", 3)]
#: Expert parallelism of the mixture-of-experts models (distlab.moe; Lesson 10): EP sizes, and expert TP either
#: the attention's TP (Megatron's default) or none.
EP_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
ETP_OPTIONS = [("= TP", None), ("1", 1)]


class TrainingLabApp(LessonApp):
    """The training calculator: every number from distlab.training.estimate (and triage.explain_infeasible).

    `result` holds the current StepEstimate (None on invalid input); `error` the message shown
    instead (None when valid). The data-parallel degree is GPUs / (tp x pp); the micro-batch
    size gives the microbatches per pipeline, m = global batch / (dp x micro-batch size).
    """

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
    ):
        narrow = widgets.Layout(width="210px")
        # the dense catalog, then the mixture-of-experts one (distlab.moe, Lesson 10)
        self.model = widgets.Dropdown(
            options=list(models.MODELS) + list(moe.MOE_MODELS), value=model, description="model", layout=narrow
        )
        self.node = widgets.Dropdown(options=list(hardware.NODES), value=node, description="node", layout=narrow)
        self.nodes = widgets.Dropdown(options=NODE_COUNTS, value=nodes, description="nodes", layout=narrow)
        self.fabric = widgets.Dropdown(options=FABRICS, value=fabric, description="fabric", layout=narrow)
        self.global_batch = widgets.Dropdown(options=BATCHES, value=global_batch, description="batch", layout=narrow)
        self.seq_len = widgets.Dropdown(options=SEQS, value=seq_len, description="sequence", layout=narrow)
        self.tp = widgets.ToggleButtons(
            options=[1, 2, 4, 8], value=tp, description="TP", style={"button_width": "40px"}
        )
        self.pp = widgets.ToggleButtons(
            options=[1, 2, 4, 8, 16], value=pp, description="PP", style={"button_width": "40px"}
        )
        # context parallelism by ring attention (training.estimate's cp): each GPU holds s / cp of a sequence
        self.cp = widgets.Dropdown(options=[1, 2, 4, 8, 16], value=cp, description="CP", layout=narrow)
        self.micro_batch_size = widgets.Dropdown(
            options=[1, 2, 4, 8], value=micro_batch_size, description="micro-batch", layout=narrow
        )
        self.schedule = widgets.Dropdown(
            options=list(training.SCHEDULES), value=schedule, description="schedule", layout=narrow
        )
        self.chunks = widgets.Dropdown(
            options=[1, 2, 4, 5, 10, 20], value=chunks, description="chunks v", layout=narrow
        )
        self.zero = widgets.ToggleButtons(
            options=ZERO_LABELS, value=zero, description="sharding", style={"button_width": "70px"}
        )
        self.recompute = widgets.Dropdown(
            options=list(memory.RECOMPUTE_MODES), value=recompute, description="recompute", layout=narrow
        )
        self.sequence_parallel = widgets.Checkbox(
            value=sequence_parallel, description="sequence parallel", layout=narrow
        )
        # None: the calibrated compute model (distlab.efficiency, Lesson 7 §8); a number: Lesson 7 §1's fixed share
        self.efficiency = widgets.Dropdown(
            options=EFFICIENCY_OPTIONS, value=efficiency, description="compute", layout=narrow
        )
        # an engine's memory, not the ZeRO paper's minimum: DeepSpeed runs every ZeRO stage (distlab.memory_recipes)
        self.memory_recipe = widgets.Dropdown(
            options=list(memory_recipes.MEMORY_RECIPES), value=memory_recipe, description="memory", layout=narrow
        )
        # expert parallelism (MoE models only): experts over ep GPUs, each expert's matrices over etp
        self.ep = widgets.Dropdown(options=EP_SIZES, value=ep, description="EP", layout=narrow)
        self.etp = widgets.Dropdown(options=ETP_OPTIONS, value=etp, description="expert TP", layout=narrow)
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((7.2, 2.6), dict(left=0.08, right=0.98, bottom=0.2, top=0.95, wspace=0.3))
        grid = self.fig.add_gridspec(1, 3)
        self.ax_mem = self.fig.add_subplot(grid[0, 0])
        self.ax_time = self.fig.add_subplot(grid[0, 1:])
        self.mem_bars = memory_bars(self.ax_mem, 1, legend=False)
        self.ax_mem.set_xticks([])
        self.time_bars = step_bars(self.ax_time, 1, legend=False)
        self.ax_time.set_yticks([])
        self.renderer = BlitRenderer(
            self.canvas,
            self.mem_bars.animated_artists + self.time_bars.animated_artists,
            static_key=lambda: axes_state(self.fig),  # a rescaled axis seen before is restored, not redrawn
        )
        self.result: training.StepEstimate | None = None
        self.error: str | None = None
        self._controls = (
            self.model,
            self.node,
            self.nodes,
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
        )
        for control in self._controls:
            control.observe(self._on_change, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.model, self.node, self.nodes]),
                widgets.HBox([self.fabric, self.global_batch, self.seq_len]),
                self.tp,
                self.pp,
                widgets.HBox([self.micro_batch_size, self.schedule, self.chunks]),
                self.zero,
                widgets.HBox([self.recompute, self.sequence_parallel, self.efficiency]),
                widgets.HBox([self.memory_recipe, self.cp]),
                widgets.HBox([self.ep, self.etp]),
            ]
        )
        self.ep.disabled = self.etp.disabled = not moe_step.is_moe(model)
        legends = widgets.HTML(memory_legend_html() + step_legend_html())
        super().__init__([controls, legends, self.canvas, self.status])
        self._syncing = False
        self._sync_controls()
        self.update()

    def valid_batches(self) -> list:
        """The global batches the batch dropdown offers: multiples of dp x micro-batch (each replica gets whole
        microbatches), dp = GPUs / (tp x cp x pp); the smallest such multiple when no listed batch is one."""
        gpus = hardware.node(self.node.value).gpus_per_node * self.nodes.value
        step = max(1, gpus // (self.tp.value * self.cp.value * self.pp.value)) * self.micro_batch_size.value
        return [b for b in BATCHES if b % step == 0] or [step]

    def _sync_controls(self) -> None:
        """Enable what applies (chunks: interleaved only; sequence parallelism: tp > 1), offer valid batches."""
        self.chunks.disabled = self.schedule.value != "interleaved"
        self.sequence_parallel.disabled = self.tp.value == 1
        self.ep.disabled = self.etp.disabled = not moe_step.is_moe(self.model.value)
        batches = self.valid_batches()
        if list(self.global_batch.options) != batches:
            keep = min((b for b in batches if b >= self.global_batch.value), default=batches[-1])
            replace_options(self, self.global_batch, batches, keep)

    def _on_change(self, change=None):
        if self._syncing:
            return
        self._sync_controls()
        self.update()

    def config(self) -> dict:
        """estimate()'s keyword arguments from the controls."""
        interleaved = self.schedule.value == "interleaved"
        return dict(
            global_batch=self.global_batch.value,
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
            **(dict(ep=self.ep.value, etp=self.etp.value) if moe_step.is_moe(self.model.value) else {}),
        )

    def cluster(self) -> hardware.Cluster:
        return hardware.cluster(self.node.value, self.nodes.value, self.fabric.value)

    def compute(self) -> training.StepEstimate:
        return training.estimate(self.model.value, self.cluster(), **self.config())

    def render(self, est: training.StepEstimate) -> bool:
        acc = self.cluster().accelerator
        changed = self.mem_bars.update(
            [est.memory.parts()], None, acc.memory_bytes, f"{acc.name}: {format_bytes(acc.memory_bytes)}"
        )
        changed |= self.time_bars.update([est.parts()])
        return changed

    def fade(self) -> bool:
        changed = self.mem_bars.update([{}], faded=True)
        changed |= self.time_bars.update([{}], faded=True)
        return changed

    def status_kind(self, est: training.StepEstimate) -> str:
        return "ok" if est.feasible else "bad"

    def describe(self, est: training.StepEstimate) -> str:
        """The text under the chart: configuration, step time, MFU, throughput, fit or why not."""
        c = est.config
        head = (
            f"dp={c['dp']} x tp={c['tp']}"
            + (f" x cp={c['cp']}" if c["cp"] > 1 else "")
            + f" x pp={c['pp']}"
            + (f" (v={c['chunks']})" if c["chunks"] > 1 else "")
            + (f", experts over ep={c['ep']} x etp={c['etp']}" if "ep" in c else "")
            + f" = {est.gpus} GPUs; {c['microbatches']} microbatches of {c['micro_batch_size']} per pipeline "
            "[training.estimate]"
        )
        parts = ", ".join(f"{name} {format_seconds(value)}" for name, value in est.parts().items() if value > 0)
        lines = [
            head,
            f"step time {format_seconds(est.step_time_s)} ({parts})",
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
            fixes = triage.explain_infeasible(self.model.value, self.cluster(), **self.config())
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


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [TrainingLabApp]
