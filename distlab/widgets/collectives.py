"""Lesson 2 app: the ring all-reduce (or a parameter server) animated from a real simulation.

Every picture is a state of distlab.collectives.simulate_ring_all_reduce (or
simulate_parameter_server): the colours of all states are computed once per GPU count from
the trace's contributor record and sent to the browser with the text of every step, where the
picture (distlab.widgets.browser.RingPicture) draws them: its step slider and play button
need no kernel round trip. The pictures of every state one change of the algorithm, the GPU count or the link away
are computed in the kernel's idle turns and held by the browser (distlab.widgets.prefetch, issue 32), so such a
change redraws there at once and the kernel confirms it; a new size M goes to the kernel.
"""

from __future__ import annotations

from typing import Any

import functools
from dataclasses import dataclass
from fractions import Fraction

import ipywidgets as widgets
import numpy as np

from .. import collectives, hardware
from ..errors import DistlabError
from ..plots.collectives import MAX_PICTURE_GPUS, collective_frames
from ..units import format_bytes, format_seconds
from .browser import RingPicture, ring_frames
from .common import LessonApp, attempt
from .prefetch import Prefetcher

__all__ = [
    "ALGORITHMS",
    "RING_CONTROLS",
    "simulate",
    "RingFrame",
    "RingSimulation",
    "simulation",
    "describe_state",
    "describe_frame",
    "ring_texts",
    "ring_payload_steps",
    "ring_neighbour",
    "RingAllReduceApp",
    "APPS",
]

ALGORITHMS = [("ring", "ring"), ("parameter server", "parameter-server")]


def simulate(algorithm: str, n: int):
    """The trace the app draws: N GPUs, each holding N integers (one element per ring chunk)."""
    arrays = [np.full(n, g + 1, dtype=np.int64) for g in range(n)]
    if algorithm == "parameter-server":
        return collectives.simulate_parameter_server(arrays, server=0)
    return collectives.simulate_ring_all_reduce(arrays)


@dataclass(frozen=True)
class RingFrame:
    """What the app shows: the simulation, the state (after `state` steps) and the cost for M on the link."""

    trace: Any  # CollectiveTrace
    state: int
    caption: str
    cost: Any  # CollectiveCost of the whole collective for the chosen M and link
    busiest_gpu: int
    sent_fraction: Fraction  # of M, sent so far by the busiest GPU
    received_fraction: Fraction  # of M, received so far by the busiest GPU

    @property
    def sent_bytes(self) -> float:
        return float(self.sent_fraction) * self.cost.size_bytes

    @property
    def received_bytes(self) -> float:
        return float(self.received_fraction) * self.cost.size_bytes


def _fraction_text(f: Fraction) -> str:
    return "0" if f == 0 else (f"{f.numerator}" if f.denominator == 1 else f"{f.numerator}/{f.denominator}")


def describe_state(trace, t: int) -> str:
    """One sentence for state t of a trace, read off its record (phase and sends of the last step)."""
    n, steps = trace.gpus, trace.steps
    if t == 0:
        return "Start: every GPU holds only its own gradient (one colour per GPU). Press play or move the step slider."
    k = t - 1
    phase = trace.phase(k)
    head = f"Step {t} of {steps} ({phase}): "
    senders = np.nonzero(trace.send_to[k] >= 0)[0]
    if trace.algorithm == "parameter-server":
        s = int(senders[0])
        r = int(trace.send_to[k, s])
        if phase == "push":
            text = head + f"GPU {s} sent its whole gradient (M) to the server, GPU {r}, which added it to its sum."
            if t == n - 1:
                text += " The server now holds the full sum; the workers wait."
        else:
            text = head + f"the server sent the full sum (M) to GPU {r}; the other workers wait their turn."
            if t == steps:
                text += " Done: every GPU holds the sum."
        return text
    if phase == "reduce-scatter":
        text = head + f"every GPU sent one chunk (M/{n}) to its neighbour, which added it to its own copy (outlined)."
        if t == n - 1:
            text += f" Each GPU now holds one chunk summed over all {n} GPUs (one full column)."
    else:
        text = head + "every GPU passed a finished chunk on to its neighbour, which copied it (outlined)."
        if t == steps:
            text += " Done: every GPU holds every chunk of the sum."
    return text


#: The ring app's controls whose labels key the browser's cache (distlab.widgets.prefetch, issue 32), in the
#: picture's order; a state is these values, the size M (a text box: not a key) and "fresh" (the picture starts again
#: at step 0: a change of the algorithm or the GPU count).
RING_CONTROLS = ("algorithm", "gpus", "link")


@dataclass(frozen=True)
class RingSimulation:
    """What the app draws for one algorithm and GPU count, whatever M and the link: the trace, its busiest GPU, the
    fractions of M it has sent and received after each step, the caption of each state and the picture's frames."""

    trace: Any  # CollectiveTrace
    busiest: int
    fractions: list  # [(sent, received)] as Fractions of M, per state
    captions: list
    frames: dict


@functools.lru_cache(maxsize=64)
def simulation(algorithm: str, n: int) -> RingSimulation:
    """The simulation of `algorithm` on `n` GPUs with every state's caption and frames (remembered: 2 algorithms x
    15 GPU counts at most)."""
    trace = simulate(algorithm, n)
    busiest = int(trace.server if trace.server is not None else 0)
    size = int(trace.size_bytes)
    sent, received = trace.bytes_so_far(busiest)
    fractions = [(Fraction(int(a), size), Fraction(int(b), size)) for a, b in zip(sent, received)]
    captions = [describe_state(trace, t) for t in range(trace.steps + 1)]
    return RingSimulation(trace, busiest, fractions, captions, ring_frames(trace, collective_frames(trace)))


def ring_texts(sim: RingSimulation, size, link: str) -> tuple[list, list]:
    """(the text of every step, our message at every step or "") for the simulation with M = `size` on `link`."""
    cost = attempt(
        lambda: collectives.collective_cost(
            "all-reduce", size, sim.trace.gpus, algorithm=sim.trace.algorithm, link=link
        )
    )
    outcomes = []
    for t in range(sim.trace.steps + 1):
        if isinstance(cost, DistlabError):
            outcomes.append(cost)
            continue
        sent, received = sim.fractions[t]
        frame = RingFrame(sim.trace, t, sim.captions[t], cost, sim.busiest, sent, received)
        outcomes.append(attempt(describe_frame, frame, link))
    summaries = ["" if isinstance(o, DistlabError) else o for o in outcomes]
    errors = [str(o) if isinstance(o, DistlabError) else "" for o in outcomes]
    return summaries, errors


def ring_neighbour(s: dict, name: str, value) -> dict:
    """The state after the student sets control `name` to `value` in state `s`: a new algorithm or GPU count starts
    the picture again at step 0 (the app's _rebuild(0)); a new link keeps the step."""
    return {**s, name: value, "fresh": name in ("algorithm", "gpus")}


def ring_payload_steps(s: dict):
    """A generator computing what the picture shows in state `s` (distlab.widgets.prefetch runs it in the kernel's
    idle turns): {"summaries", "errors", "frames"}, and for a fresh state the slider's range and step 0 too."""
    sim = simulation(s["algorithm"], s["gpus"])
    yield
    summaries, errors = ring_texts(sim, s["size"], s["link"])
    shown: dict = {"summaries": summaries, "errors": errors, "frames": sim.frames}
    if s.get("fresh"):
        shown.update(min=0, max=sim.trace.steps, value=0)
    return shown


class RingAllReduceApp(LessonApp):
    """N, algorithm, step (with Play), message size and link -> the animated collective and its cost.

    The picture is drawn in the browser (distlab.widgets.browser.RingPicture): it is sent every state of
    the simulation and the text of every step at once, so its step slider and play button need no kernel.
    `step` is that picture's slider. `result` is the current RingFrame (None on invalid input), `error`
    our message instead.
    """

    summary_in_picture = True

    def __init__(self, gpus=4, algorithm="ring", size="4 GB", link="nvlink4", step=0, interval_ms=800):
        self.algorithm = widgets.ToggleButtons(
            options=ALGORITHMS, value=algorithm, description="algorithm", style={"button_width": "130px"}
        )
        self.gpus = widgets.IntSlider(
            value=gpus, min=2, max=MAX_PICTURE_GPUS, description="GPUs (N)", continuous_update=False
        )
        self.size = widgets.Text(
            value=size, description="size M", continuous_update=False, layout=widgets.Layout(width="200px")
        )
        self.link = widgets.Dropdown(
            options=list(hardware.LINKS), value=link, description="link", layout=widgets.Layout(width="220px")
        )
        self.status = widgets.HTML()
        self.picture = RingPicture(
            description="step", playable=True, interval_ms=interval_ms, width=460, height=440, max=2 * (gpus - 1)
        )
        self.step = self.picture  # the step slider lives in the picture (in the browser)
        self.result: RingFrame | None = None
        self.error: str | None = None
        self.trace = None
        self._cost_cache = (None, None)  # (key, CollectiveCost) of the last valid size and link
        # the browser's cache of the states one change away (issue 32): ring.js watches these controls
        self.picture.controls = [getattr(self, name) for name in RING_CONTROLS]
        self.picture.inputs = [self.size]
        self.prefetcher = Prefetcher(self.picture, ring_payload_steps)
        self._moved = None
        self.algorithm.observe(self._on_structure, names="value")
        self.gpus.observe(self._on_structure, names="value")
        self.size.observe(self._on_numbers, names="value")
        self.link.observe(self._on_numbers, names="value")
        controls = widgets.VBox([self.algorithm, self.gpus, widgets.HBox([self.size, self.link])])
        super().__init__([controls, self.picture, self.status])
        self._rebuild(step)
        self.picture.observe(self._on_step, names="value")

    # -- the simulation, once per N and algorithm --------------------------------------
    def close(self) -> None:
        """Close the app's widgets; a prefetch under way stops at its next turn."""
        if "prefetcher" in self.__dict__:
            self.prefetcher.stop()
        super().close()

    def state(self) -> dict:
        """The controls' values and the size M: what the picture shows depends on these (and the step)."""
        return {**{name: getattr(self, name).value for name in RING_CONTROLS}, "size": self.size.value, "fresh": False}

    def _rebuild(self, step: int = 0):
        sim = simulation(self.algorithm.value, self.gpus.value)
        self.sim, self.trace = sim, sim.trace
        self._busiest, self._fractions, self._captions, self._frames = (
            sim.busiest,
            sim.fractions,
            sim.captions,
            sim.frames,
        )
        self._show(min(max(step, 0), self.trace.steps))

    def _show(self, step=None) -> None:
        """Send the picture every state and the text of every step for the current size and link (our message
        at every step when they are invalid), then update the app's own result; then, in a kernel, the states one
        control change away are prefetched into the browser."""
        summaries, errors = ring_texts(self.sim, self.size.value, self.link.value)
        self._syncing = True
        try:
            self.picture.show(0, self.trace.steps, summaries, errors, frames=self._frames, value=step)
        finally:
            self._syncing = False
        self.update()
        controls = {name: getattr(self, name) for name in RING_CONTROLS}
        self.prefetcher.start_around(controls, self.state(), self._moved, ring_neighbour)

    def _on_structure(self, change=None):
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        self._rebuild(0)

    def _on_step(self, change=None):
        if not getattr(self, "_syncing", False):
            self.update()

    def _on_numbers(self, change=None):
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        self._show()

    # -- model and view ------------------------------------------------------------------
    def _cost(self):
        """The whole collective's cost for M on the link: it does not change with the step, so it is cached
        (a valid one only: invalid input raises again, which costs one failed parse)."""
        key = (self.trace.algorithm, self.trace.gpus, self.size.value, self.link.value)
        if self._cost_cache[0] != key:
            cost = collectives.collective_cost(
                "all-reduce", self.size.value, self.trace.gpus, algorithm=self.trace.algorithm, link=self.link.value
            )
            self._cost_cache = (key, cost)
        return self._cost_cache[1]

    def frame(self, t: int) -> RingFrame:
        """The frame after t steps for the current size and link; raises DistlabError on invalid input."""
        cost = self._cost()
        sent, received = self._fractions[t]
        return RingFrame(self.trace, t, self._captions[t], cost, self._busiest, sent, received)

    def compute(self) -> RingFrame:
        """The frame for the current controls; raises DistlabError on invalid input."""
        return self.frame(self.step.value)

    def describe(self, f: RingFrame) -> str:
        """describe_frame on the chosen link."""
        return describe_frame(f, self.link.value)


def describe_frame(f: RingFrame, link_name: str) -> str:
    """The text under the picture: what happened in this step, bytes so far, and the whole cost on the link."""
    cost, n = f.cost, f.trace.gpus
    link = hardware.link(link_name)
    if f.trace.algorithm == "parameter-server":
        so_far = (
            f"The server (GPU {f.busiest_gpu}) has received {_fraction_text(f.received_fraction)} x M = "
            f"{format_bytes(f.received_bytes)} and sent {_fraction_text(f.sent_fraction)} x M = "
            f"{format_bytes(f.sent_bytes)} so far [collectives.simulate_parameter_server]."
        )
        whole = (
            f"Whole all-reduce of M = {format_bytes(cost.size_bytes)}: the server sends (N-1) x M = "
            f"{format_bytes(cost.bytes_sent_per_gpu)} and receives as much, one message at a time: "
            f"{cost.steps} steps, {format_seconds(cost.time_s)} on {link.name} "
            "[collectives.collective_cost]."
        )
    else:
        so_far = (
            f"Each GPU has sent {_fraction_text(f.sent_fraction)} x M = {format_bytes(f.sent_bytes)} "
            f"so far [collectives.simulate_ring_all_reduce]."
        )
        whole = (
            f"Whole all-reduce of M = {format_bytes(cost.size_bytes)}: each GPU sends 2(N-1)/N x M = "
            f"{_fraction_text(Fraction(2 * (n - 1), n))} x M = {format_bytes(cost.bytes_sent_per_gpu)} in "
            f"{cost.steps} steps, {format_seconds(cost.time_s)} on {link.name} "
            "[collectives.collective_cost]."
        )
    return f"{f.caption}\n{so_far}\n{whole}"


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [RingAllReduceApp]
