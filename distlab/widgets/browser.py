"""Pictures drawn in the browser (issue 20): anywidget widgets fed with data distlab computes in Python.

The physics stays in Python. A picture is sent the data of EVERY position of its slider at once (the
ring's every state, a pipeline timeline for every microbatch count), with the text summary of each
position, so stepping, playing and dragging within the slider's range redraw in the browser with no
round trip to the kernel; a change that needs new physics (another GPU count, another schedule) goes
to the kernel once and replaces the data. The drawing code is plain ES modules shipped inside the
package (distlab/widgets/browser_js/, package data): nothing is fetched from the network and there
is no JavaScript build step. Their state is ordinary widget state, so a notebook saved with its
widget state or served by Voila shows them too.

Each picture draws on a canvas at the device's pixel ratio in a colour-blind-safe palette (Okabe &
Ito 2008), is controlled by a native ``<input type=range>`` and ``<button>`` (keyboard: arrows,
Home/End, Space), and writes the numbers it shows into an aria-live text summary under it.
"""

from __future__ import annotations

from importlib import resources

import anywidget
import ipywidgets as widgets
import numpy as np
import traitlets

from .prefetch import state_key

__all__ = [
    "module_source",
    "BrowserPicture",
    "SelectionPicture",
    "RingPicture",
    "TimelinePicture",
    "BarsPicture",
    "GridPicture",
    "LabPicture",
    "LadderPicture",
    "ring_frames",
    "timeline_buffers",
]

#: The ES module every picture shares; each picture's own module is appended to it.
COMMON_MODULE = "common.js"


#: The browser's cache of the states one control change away (issue 32), put before the module of a picture whose
#: app's other controls change its data (the training lab, the triage ladder, lessons 1-3's bars and ring, lesson 4's
#: timeline, lesson 6's grid).
PREFETCH_MODULE = "prefetch.js"


def module_source(*names: str) -> str:
    """The ES module of one picture: the shared part followed by the named parts (the picture's own last; all
    package data)."""
    folder = resources.files("distlab.widgets").joinpath("browser_js")
    return "\n".join(folder.joinpath(name).read_text(encoding="utf-8") for name in (COMMON_MODULE, *names))


def _controls_trait():
    """The app's control widgets whose labels key the browser's cache (browser_js/prefetch.js)."""
    return traitlets.List(traitlets.Instance(widgets.Widget)).tag(sync=True, **widgets.widget_serialization)


class BrowserPicture(anywidget.AnyWidget, widgets.ValueWidget):
    """A picture with its own slider over the integers min..max (and a play button when `playable`).

    `summaries[i]` is the text shown under the picture at value min + i, `errors[i]` our message
    there instead ("" when valid: a position whose input is invalid hides the canvas and shows the
    message); `frames` (JSON) and any binary traits of a subclass hold the drawing data of every
    position. `value` is synced both ways: the browser moves it without the kernel, the kernel sees
    each move and may set it. Like an IntSlider, a value outside min..max is clamped.
    """

    value = traitlets.Int(0).tag(sync=True)
    #: the app's inputs that its cached states depend on but the browser's key does not show (a text box: the ring's
    #: size M, lessons 1 and 3's custom size): the browser answers a change from its cache only while they hold the
    #: values the kernel's map was priced at (browser_js/prefetch.js, issue 32)
    inputs = _controls_trait()
    min = traitlets.Int(0).tag(sync=True)
    max = traitlets.Int(0).tag(sync=True)
    description = traitlets.Unicode("").tag(sync=True)
    alt = traitlets.Unicode("").tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)
    playable = traitlets.Bool(False).tag(sync=True)
    interval_ms = traitlets.Int(800).tag(sync=True)
    width = traitlets.Int(480).tag(sync=True)
    height = traitlets.Int(360).tag(sync=True)
    summaries = traitlets.List(traitlets.Unicode()).tag(sync=True)
    errors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    frames = traitlets.Dict().tag(sync=True)
    #: the state the data was computed for: the browser's key of the app's controls (prefetch.state_key), sent in the
    #: same message as the data; the browser paints the data only while its controls show that state (a change the
    #: student has left is not painted: browser_js/prefetch.js, issue 32). "" where the picture has no `controls`.
    data_key = traitlets.Unicode("").tag(sync=True)

    @traitlets.validate("value")
    def _clamp(self, proposal):
        return int(min(max(proposal["value"], self.min), self.max))

    def _name_state(self) -> None:
        """Set data_key to the key of the controls' state now (nothing where the picture has none). A control whose
        value is not among its options (between a new list of options and its value) names no state: ""."""
        controls = getattr(self, "controls", None)
        if not controls:
            return
        try:
            self.data_key = state_key(controls)
        except (StopIteration, ValueError, TypeError):
            self.data_key = ""

    def show(self, lo: int, hi: int, summaries, errors=None, frames=None, value=None, **data) -> None:
        """Replace the data of every position at once (one message to the browser); `value` (default: the
        current one, clamped) is where the slider then stands."""
        summaries = list(summaries)
        if len(summaries) != hi - lo + 1:
            raise ValueError(f"{len(summaries)} summaries for the {hi - lo + 1} positions {lo}..{hi}")
        errors = [""] * len(summaries) if errors is None else list(errors)
        with self.hold_sync():
            self._name_state()
            if lo > self.max:
                self.max = hi
                self.min = lo
            else:
                self.min = lo
                self.max = hi
            for name, array in data.items():
                setattr(self, name, array)
            if frames is not None:
                self.frames = frames
            self.summaries = summaries
            self.errors = errors
            self.value = self.value if value is None else value

    def _position(self) -> int:
        """The index of the current value in summaries and errors."""
        return self.value - self.min

    def show_error(self, message: str) -> None:
        """Our message at the current position (LessonApp.update, when the app's result there is our error): the
        browser shows it in place of the summary and hides the canvas. Nothing is sent when it is there already."""
        i = self._position()
        errors = list(self.errors) + [""] * (len(self.summaries) - len(self.errors))
        if 0 <= i < len(errors) and errors[i] != message:
            errors[i] = message
            with self.hold_sync():
                self._name_state()
                self.errors = errors

    @property
    def summary(self) -> str:
        """The text the browser shows under the picture now: the summary, or our message."""
        i = self.value - self.min
        if not 0 <= i < len(self.summaries):
            return ""
        return f"Cannot compute: {self.errors[i]}" if self.errors and self.errors[i] else self.summaries[i]

    @property
    def canvas_shown(self) -> bool:
        """Whether the browser shows the canvas now: not at a position with our message (common.js hides it
        there, so the message stands where the picture would be, with no blank space above it)."""
        i = self.value - self.min
        return not (self.errors and 0 <= i < len(self.errors) and self.errors[i])


class SelectionPicture(BrowserPicture):
    """A picture whose slider runs over `options` (increasing integers, e.g. distlab.widgets.common.GPU_COUNTS)
    instead of every integer: `value` is always one of them (a value between two snaps to the nearest, as a
    slider would), `index` its position; summaries[i] and errors[i] belong to options[i]."""

    options = traitlets.List(traitlets.Int()).tag(sync=True)

    @traitlets.validate("value")
    def _clamp(self, proposal):
        if not self.options:
            return int(proposal["value"])
        return int(min(self.options, key=lambda o: (abs(o - proposal["value"]), o)))

    @property
    def index(self) -> int:
        return self.options.index(self.value)

    @index.setter
    def index(self, k: int) -> None:
        self.value = self.options[k]

    def _position(self) -> int:
        return self.index

    def show_options(self, options, summaries, errors=None, frames=None, value=None) -> None:
        """Replace the options and the data of every option at once; `value` defaults to the current one."""
        options = [int(o) for o in options]
        if len(summaries) != len(options):
            raise ValueError(f"{len(summaries)} summaries for {len(options)} options")
        with self.hold_sync():
            self._name_state()
            self.options = options
            self.min, self.max = min(options), max(options)
            if frames is not None:
                self.frames = frames
            self.summaries = list(summaries)
            self.errors = [""] * len(options) if errors is None else list(errors)
            self.value = self.value if value is None else value

    @property
    def summary(self) -> str:
        """The text the browser shows under the picture now: the summary, or our message."""
        i = self.index
        return f"Cannot compute: {self.errors[i]}" if self.errors and self.errors[i] else self.summaries[i]

    @property
    def canvas_shown(self) -> bool:
        """Whether the browser shows the canvas now: not at a position with our message (common.js hides it
        there, so the message stands where the picture would be, with no blank space above it)."""
        return not (self.errors and 0 <= self.index < len(self.errors) and self.errors[self.index])


class RingPicture(BrowserPicture):
    """Every state of a simulated collective (distlab.collectives): GPU panels of chunk columns, one stripe
    per contributing GPU, the chunks just received outlined and the links that carried a message drawn
    black. The slider is the state t (0 = start, steps = end) with a play button.

    `controls`: the app's controls whose neighbouring states the browser caches (distlab.widgets.prefetch, issue 32)."""

    _esm = module_source(PREFETCH_MODULE, "ring.js")
    controls = _controls_trait()


class LadderPicture(BrowserPicture):
    """The OOM triage ladder (Lesson 8b's TriageApp): memory per GPU of the given configuration and of each rung,
    stacked by part, against the GPU's capacity. One position, so no slider: the app's controls send each ladder
    in one message (show(0, 0, ...)) and the browser draws it, axes included.

    frames: distlab.plots.production.ladder_frames(triage) wrapped in one position ({"bars": [bars], ...}).
    `controls`: the app's controls, whose neighbouring states' ladders the browser caches (distlab.widgets.prefetch)."""

    _esm = module_source(PREFETCH_MODULE, "ladder.js")
    controls = _controls_trait()
    #: The ladder's legend (HTML distlab writes), shown above the bars and hidden with them at our message (issue 31:
    #: a legend outside the picture stayed above "Cannot compute", also when the browser drew that state from its cache).
    legend = traitlets.Unicode("").tag(sync=True)


def ring_frames(trace, frames) -> dict:
    """The drawing data of every state of `trace`, from its record: `frames` is
    distlab.plots.collectives.collective_frames(trace). holds[t][g * chunks + c] has bit j set when GPU
    g's chunk c sums GPU j's data in state t (the contributor record as bit masks)."""
    holds = np.asarray(frames.holds, dtype=np.int64)  # [t, gpu, chunk, contributor]
    weights = np.left_shift(np.int64(1), np.arange(holds.shape[-1], dtype=np.int64))
    masks = (holds * weights).sum(axis=-1).reshape(holds.shape[0], -1)
    received = [[[int(g), int(c)] for g, c in np.argwhere(frames.received[t])] for t in range(holds.shape[0])]
    busy = [[int(i) for i in np.nonzero(frames.busy[t])[0]] for t in range(holds.shape[0])]
    return {
        "gpus": int(trace.gpus),
        "chunks": int(trace.n_chunks),
        "contributors": int(trace.n_contributors),
        "server": -1 if trace.server is None else int(trace.server),
        "pairs": [[int(s), int(r)] for s, r in frames.pairs],
        "holds": masks.tolist(),
        "received": received,
        "busy": busy,
    }


#: Kinds of pipeline op, in the order of their colour codes (code = 2 x kind + microbatch parity).
OP_KINDS = ("F", "B", "W")


class TimelinePicture(BrowserPicture):
    """A pipeline step for every microbatch count: stages x time, forward / backward / weight-gradient ops
    (odd microbatches lighter), idle time grey, the step's end (solid) and the ideal time (dashed).

    `times` holds float32 (start, end) pairs and `codes` uint8 (stage, 2 x kind + microbatch parity) pairs
    of every position's ops back to back; frames["positions"][i] = [first op, op count, step, ideal]; frames["legend"]
    (when sent) the colour legend drawn above the grid, [without W, with W] (HTML).

    `controls`: the app's controls whose neighbouring states the browser caches (distlab.widgets.prefetch, issue 32)."""

    _esm = module_source(PREFETCH_MODULE, "timeline.js")
    controls = _controls_trait()
    times = traitlets.Bytes(b"").tag(sync=True)
    codes = traitlets.Bytes(b"").tag(sync=True)


def timeline_buffers(timelines) -> tuple[dict, bytes, bytes]:
    """(frames, times, codes) for a TimelinePicture from one distlab.pipeline Timeline per position (None where
    the input is invalid: no ops). Times are in the timeline's own unit (t_F = 1 in Lesson 4's grid)."""
    positions, times, codes = [], [], []
    first, stages = 0, 1
    for tl in timelines:
        if tl is None:
            positions.append([first, 0, 1.0, 1.0])
            continue
        stages = max(stages, int(tl.stages))
        kind = np.select([tl.kind == k for k in OP_KINDS], range(len(OP_KINDS)), default=0)
        code = 2 * kind + (np.asarray(tl.microbatch) % 2)
        times.append(np.column_stack([tl.start, tl.end]).astype(np.float32).ravel())
        codes.append(np.column_stack([tl.stage, code]).astype(np.uint8).ravel())
        count = int(tl.start.size)
        positions.append([first, count, float(tl.step_time), float(np.max(tl.busy))])
        first += count
    packed_times = np.concatenate(times).tobytes() if times else b""
    packed_codes = np.concatenate(codes).tobytes() if codes else b""
    from ..plots.pipeline import COLOURS, IDLE_COLOUR, STEP_COLOUR

    # the colours of the legend (plots.pipeline.legend_html), so the picture draws what the legend names (issue 31:
    # the browser grid drew Okabe-Ito colours under a legend in the plots' palette)
    colours = {"kinds": [COLOURS[k] for k in OP_KINDS], "idle": IDLE_COLOUR, "step": STEP_COLOUR}
    return {"stages": stages, "positions": positions, "colours": colours}, packed_times, packed_codes


class BarsPicture(SelectionPicture):
    """Stacked bars against a capacity line, for every option of the slider (Lesson 1's memory wall).

    frames: {"parts": names, "bars": [option][bar][part] values, "labels": bar names, "totals": [option][bar] each
    bar's total as the text writes it, "unit", "capacity", "capacity_label"}; the y range covers every option, so it
    stays put while the slider moves. The capacity line is named in the legend, not over the bars.

    `controls`: the app's controls whose neighbouring states' bars the browser caches (distlab.widgets.prefetch,
    issue 32; empty: no cache)."""

    _esm = module_source(PREFETCH_MODULE, "bars.js")
    controls = _controls_trait()


class GridPicture(BrowserPicture):
    """The GPU assignment grid of 3D parallelism (Lesson 6's MeshApp): a cell per GPU, grouped by node, filled by
    the colour-by choice. The slider is the picked GPU (0..world - 1): its TP, DP and PP groups are outlined, each
    in its colour and dash pattern, and the GPUs outside them faded, all drawn in the browser; a click on a cell
    picks that GPU.

    frames: {"x", "y": cell corners per rank (distlab.plots.parallelism_3d.grid_geometry), "width", "height",
    "gpus_per_node", "fill": colour index per rank, "fill_kind": "groups" or "ramp", "fill_count", "colour_by",
    "groups": {"tp", "dp", "pp": group index per rank}, "sizes": {"tp", "dp", "pp"}, "narrow": {"x", "y", "width",
    "height"}: the same cells stacked for an output narrower than the picture, where grid.js lays it out again}.

    `controls`: the app's controls whose neighbouring states the browser caches (distlab.widgets.prefetch, issue 32)."""

    _esm = module_source(PREFETCH_MODULE, "grid.js")
    controls = _controls_trait()


class LabPicture(SelectionPicture):
    """The training lab's bars (Lesson 7's TrainingLabApp): memory per GPU against the GPU's capacity, and the
    step-time breakdown, for every option of the slider (the node count).

    frames: {"memory_parts": names, "memory": [option][part] GB, "memory_top": GB (every total and the capacity,
    at most 2 x it), "capacity": GB, "capacity_label", "step_parts": names, "step": [option][part] seconds,
    "step_text": [option][part] and "step_total", "memory_total": [option] the same as text, "fits": [option]
    (memory), "verdict": [option] short text, "runs": [option] (feasible: fits, no other problem), "gpus": [option]
    GPU count}; an option not computed yet has empty lists.

    `controls`: the app's control widgets whose state keys the browser's cache of the states one change away
    (distlab.widgets.prefetch, issue 32): a change of one of them to a cached state redraws here at once."""

    _esm = module_source(PREFETCH_MODULE, "lab.js")
    controls = _controls_trait()
