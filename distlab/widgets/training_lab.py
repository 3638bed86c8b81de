"""Lesson 7 app: the full training calculator (model, cluster, fabric, batch, configuration ->
memory per GPU, step-time breakdown, MFU, throughput, and why a configuration does not fit)."""

from __future__ import annotations

import ipywidgets as widgets

from .. import hardware, memory, memory_recipes, models, moe, training
from ..errors import ConfigurationError, DistlabError
from . import training_lab_data as data
from .browser import LabPicture
from .common import (
    APP_LOCK,
    LessonApp,
    OptionalDropdown,
    event_loop_running,
    fill_order,
    fill_positions,
    offered,
    replace_options,
    show_what_applies,
)
from .prefetch import Prefetcher, home_keys, neighbour_jobs, state_key
from .training_lab_data import (
    INAPPLICABLE,
    BATCHES,
    CAPACITY_OPTIONS,
    CHUNKS,
    CONTROLS,
    CP_SIZES,
    EFFICIENCY_OPTIONS,
    EP_SIZES,
    ETP_OPTIONS,
    FABRICS,
    IMBALANCES,
    MICRO_BATCHES,
    NODE_COUNTS,
    PENDING,
    PP_SIZES,
    SEQS,
    TP_SIZES,
    ZERO_LABELS,
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

    It opens on a layout its engine runs: Llama 3.1 70B on 32 DGX H100 nodes, dp 16 x tp 4 x pp 4 with DeepSpeed's
    ZeRO-1 (Megatron-DeepSpeed's 3D layout; DeepSpeed's pipeline engine refuses ZeRO-2 and 3, the default before).
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
        pp=4,
        micro_batch_size=1,
        chunks=1,
        schedule="1f1b",
        zero=1,
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
        # the browser's cache of the states one change away (issue 32): lab.js watches these controls
        self.picture.controls = list(self._controls)
        self.prefetcher = Prefetcher(self.picture, data.payload_steps, disabled=data.disabled_controls)
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

    def close(self) -> None:
        """Close the app's widgets; a prefetch under way stops at its next turn."""
        self._generation += 1
        if "prefetcher" in self.__dict__:  # not when __init__ refused its arguments
            self.prefetcher.stop()
        super().close()

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

    def state(self) -> dict:
        """The controls' values {name: value} (training_lab_data.CONTROLS) and the batch the student chose."""
        return {
            **{name: getattr(self, name).value for name in CONTROLS},
            "chosen_batch": self._chosen_batch,
            **{f"chosen_{name}": self._chosen(name) for name in INAPPLICABLE},
        }

    def _chosen(self, name: str):
        """The student's choice of an INAPPLICABLE control: its value while enabled, the one it had before it was
        disabled otherwise (widgets.common.show_what_applies keeps it)."""
        control = getattr(self, name)
        return control.value if not control.disabled else getattr(control, "_distlab_chosen", control.value)

    def valid_batches(self, nodes: int | None = None) -> list:
        """The global batches the batch dropdown offers at `nodes` (default: the slider's; training_lab_data)."""
        return data.valid_batches(self.state(), self.nodes.value if nodes is None else nodes)

    def valid_imbalances(self) -> list:
        """The load imbalances the imbalance dropdown offers (training_lab_data.valid_imbalances)."""
        return data.valid_imbalances(self.state())

    def batch_at(self, nodes: int) -> int:
        """The global batch the lab uses at `nodes`: the batch the student chose when that count offers it, else
        the next larger one it offers (what the batch dropdown shows when the slider goes there). It depends on the
        chosen batch only, not on where the slider has been: moving to 128 nodes and back keeps the numbers."""
        return data.batch_at(self.state(), nodes)

    def _sync_controls(self) -> None:
        """Enable what applies (chunks: interleaved only; sequence parallelism: tp > 1), offer valid batches."""
        imbalances = self.valid_imbalances()
        if list(self.moe_imbalance.options) != imbalances:
            keep = max(v for v in imbalances if v <= self.moe_imbalance.value)
            replace_options(self, self.moe_imbalance, imbalances, keep)
        zeros = data.valid_zero(self.state())  # the stages the memory recipe's engine runs
        if [tuple(o) for o in self.zero.options] != zeros:
            replace_options(self, self.zero, zeros, data.nearest_zero(self.zero.value, zeros))
        # one rule for the kernel and the browser's cached payloads (training_lab_data.disabled_controls); a control
        # that does nothing shows the value the model uses (training_lab_data.INAPPLICABLE)
        for name, control, disabled in zip(data.CONTROLS, self._controls, data.disabled_controls(self.state())):
            if name in data.INAPPLICABLE:
                show_what_applies(self, control, not disabled, *data.INAPPLICABLE[name])
            elif disabled is not None:
                control.disabled = disabled
        batches = self.valid_batches()
        if list(self.global_batch.options) != batches:
            replace_options(self, self.global_batch, batches, self.batch_at(self.nodes.value))

    def _on_change(self, change=None):
        if self._syncing:
            return
        self.prefetcher.forget(change)
        if change is not None and change.get("owner") is self.global_batch:
            self._chosen_batch = change["new"]
        self._moved = change.get("owner") if change is not None else None
        self._sync_controls()
        self._refresh()

    def _on_nodes(self, change=None):
        """The slider moved (in the browser, which has drawn it already): the batch dropdown follows (batch_at);
        nothing is priced again, as every count was priced with its batch_at. The neighbours are fetched again (the
        batch dropdown's neighbours are those at the new count)."""
        if self._syncing:
            return
        self.prefetcher.forget(change)
        self._sync_controls()
        self.update()
        self._prefetch(self._generation)

    _syncing = False
    _generation = 0
    _moved = None
    #: The background filling of the other node counts in a kernel (an asyncio.Future; None when done at once).
    filling = None

    def _refresh(self) -> None:
        """Every node count of the slider for the other controls: the current count first (the others shown as
        PENDING), the others in later turns of the kernel's event loop (at once outside one). A fill the app's own
        cell starts is finished when that cell ends (common.finish_cell_fills), so a saved notebook keeps every
        count (nbconvert, Voila, an export to HTML). A state the kernel has prefetched is shown complete at once.
        Then, in a kernel, the states one control change away are prefetched into the browser (_prefetch)."""
        self._generation += 1
        generation = self._generation
        self.prefetcher.stop()
        current = self.nodes.value
        self._results, self._texts = {}, {}
        self._price(current)
        known = self.prefetcher.lookup(self.state())
        if known is not None:
            self.filling = None
            self._show(known)
            self._prefetch(generation)
            return
        if event_loop_running():
            self._send()
        pending = fill_order([n for n in NODE_COUNTS if n != current], current)
        self.filling = fill_positions(pending, self._price, lambda: generation == self._generation, self._send)
        if self.filling is not None:
            self.filling.add_done_callback(lambda _: self._prefetch(generation))

    def _prefetch(self, generation: int) -> None:
        """In a kernel: the picture data of every state one control change away, sent to the browser in idle turns,
        the control just moved first (distlab.widgets.prefetch); nothing when a newer change has come. Under
        filling.APP_LOCK, from the check to the start, as PrefetchingApp._prefetch (a fill's done callback)."""
        with APP_LOCK:
            if generation != self._generation or not event_loop_running() or self.picture.comm is None:
                return
            jobs = self.neighbour_jobs()
            controls = {name: getattr(self, name) for name in CONTROLS}
            home = home_keys(controls, self.state(), jobs, data.neighbour_state)
            self.prefetcher.start(state_key(self._controls), jobs, home, self.state())

    def neighbour_jobs(self) -> list:
        """[(the browser's key, the state)] of every state 1 to REACH steps of one control away (prefetch.neighbour_jobs
        with training_lab_data.neighbour_state), the nearest first, the control just moved first."""
        controls = {name: getattr(self, name) for name in CONTROLS}
        return neighbour_jobs(controls, self.state(), self._moved, data.neighbour_state)

    def _price(self, nodes: int) -> None:
        """The estimate and text at `nodes` (our error in place of both on invalid input)."""
        self._results[nodes], self._texts[nodes] = data.price(self.state(), nodes)

    def _send(self) -> None:
        """The bars and text of every node count priced so far to the picture (PENDING where not yet); once every
        count is priced, the kernel remembers them (a change back here is shown complete at once)."""
        shown = data.picture_data(self.state(), self._results, self._texts)
        if len(self._results) == len(NODE_COUNTS):
            self.prefetcher.remember(self.state(), shown)
        self._show(shown)

    def _show(self, shown: dict) -> None:
        self._syncing = True
        try:
            self.picture.show_options(NODE_COUNTS, shown["summaries"], shown["errors"], frames=shown["frames"])
        finally:
            self._syncing = False
        self.update()

    def config(self, nodes: int | None = None) -> dict:
        """estimate()'s keyword arguments from the controls (at `nodes`, default the slider's: its batch_at)."""
        return data.config(self.state(), nodes, shown_batch=self.global_batch.value)

    def cluster(self, nodes: int | None = None) -> hardware.Cluster:
        return data.cluster(self.state(), self.nodes.value if nodes is None else nodes)

    def _estimate(self, nodes: int) -> training.StepEstimate:
        return data.estimate(self.state(), nodes)

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
        """The text under the picture: configuration, step time, MFU, throughput, fit or why not
        (training_lab_data.describe)."""
        nodes = self.nodes.value
        text = self._texts.get(nodes)
        if self._results.get(nodes) is est and isinstance(text, str):
            return text
        return data.describe(self.state(), est, nodes)


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [TrainingLabApp]
