"""Every control of every lesson app: time from a value change to the redrawn figure, median and p95 (issue 19).

The apps come from the lesson manifest (distlab.lessons.LESSONS) and their controls from walking each app's
widget tree, so an app or control that lands later is timed without editing this file. Each sample moves one
control to the next value it offers (each option of a dropdown or toggle, up to eight steps spread over a
slider, the two states of a checkbox, a few sizes in a text box): observer -> distlab -> artists -> render and
ipympl's PNG frame, synchronous, after replaying the front end's "initialized" message (bench_memory_widget.py).
A control disabled in the app's first state is timed in the state that enables it (PREPARE); one left
disabled is reported as skipped. The collectives app's play button moves the step slider in the browser (jslink):
in the kernel its value changes nothing. Lines with (CPU time) count this process's CPU only, which other jobs on a
shared machine inflate less than wall time. Each control starts with nothing remembered (widgets.common.remembered,
pipeline.stages' alternatives): a value a cycle visits first is a first visit. An app that prepares its neighbouring
values in idle kernel turns (LessonApp.prepared_controls) is also timed inside an event loop, the preparation done
before the next change (a student who pauses), and the preparation itself apart.

    python benchmarks/run.py every_control          # n = 30 per control
    python benchmarks/bench_every_control.py TrainingLabApp TriageApp   # the named apps only
    DISTLAB_BENCH_APPS=TriageApp,BucketApp python benchmarks/run.py every_control   # these apps only
"""

from __future__ import annotations

import importlib
import os
import time

from _timing import repeat, repeat_cpu, repeat_in_event_loop, report, summarize

#: (app class, control) -> the setting that enables the control (it is disabled in the app's first state), or a list
#: of such settings, made in order.
PREPARE = {
    ("MemoryWallApp", "custom_params"): ("model", "custom size"),
    ("MemoryWallApp", "recompute"): ("activations", True),
    ("ZeroMemoryApp", "custom_params"): ("model", "custom size"),
    ("TrainingLabApp", "chunks"): ("schedule", "interleaved"),
    ("BubbleGridApp", "chunks"): ("kind", "interleaved"),
    ("StageAnalysisApp", "chunks"): ("kind", "interleaved"),
    ("TrainingLabApp", "ep"): ("model", "mixtral-8x7b"),
    ("TrainingLabApp", "etp"): ("model", "mixtral-8x7b"),
    ("TrainingLabApp", "capacity_factor"): ("model", "mixtral-8x7b"),
    ("TrainingLabApp", "moe_imbalance"): [("model", "mixtral-8x7b"), ("ep", 8)],  # ep = 1 allows only 1
}
#: Typed into free-text boxes (a size in the collectives app).
TEXT_VALUES = ["1 GB", "256 MB", "4 GB", "64 MB"]


def _walk(widget, out):
    out.append(widget)
    for child in getattr(widget, "children", ()) or ():
        _walk(child, out)
    return out


def controls(app) -> dict:
    """{attribute name: widget} for the controls a student changes (value widgets that are not output)."""
    import ipywidgets as widgets

    inside = {id(w) for w in _walk(app, [])}
    found = {}
    for name, w in vars(app).items():
        if name.startswith("_") or id(w) not in inside or w is app:
            continue
        if isinstance(w, widgets.ValueWidget) and not isinstance(w, (widgets.HTML, widgets.HTMLMath, widgets.Label)):
            found[name] = w
    return found


def offered(w) -> list:
    """The values the benchmark cycles a control through."""
    import ipywidgets as widgets

    if hasattr(w, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in w.options]
    if isinstance(w.value, bool):
        return [False, True]
    if isinstance(w.value, str):
        return TEXT_VALUES
    if isinstance(w, widgets.FloatLogSlider):  # min and max are exponents
        return [w.base ** (w.min + (w.max - w.min) * k / 7) for k in range(8)]
    if hasattr(w, "min") and hasattr(w, "max"):
        step = getattr(w, "step", 1) or 1
        count = min(8, int(round((w.max - w.min) / step)) + 1)
        values = sorted({round((w.min + (w.max - w.min) * k / max(1, count - 1)) / step) * step for k in range(count)})
        return [type(w.value)(v) for v in values]
    return [w.value * f for f in (1.0, 1.5, 2.0, 0.5)]  # a free number box


def _ready(app):
    if not hasattr(app, "canvas"):  # a picture drawn in the browser (issue 20): the kernel side is what is timed
        return app
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
    app.fig.canvas.draw()
    return app


def main(n: int = 30, apps: str | None = None) -> None:
    """Time every control of every app, or of the apps named in `apps` (comma-separated class names; default: the
    DISTLAB_BENCH_APPS environment variable, else every app): one app at a time on a shared machine."""
    from distlab.lessons import LESSONS
    from distlab.pipeline import advice
    from distlab.widgets import common

    def forget_remembered():
        """Every configuration a first visit: the apps' remembered results (widgets.common.remembered) and the
        stage analysis's remembered alternatives (pipeline.advice, functools.lru_cache) forgotten."""
        common.forget_remembered()
        advice._bubble_for.cache_clear()

    wanted = {a for a in (apps or os.environ.get("DISTLAB_BENCH_APPS", "")).split(",") if a}
    seen = set()
    for lesson in LESSONS.values():
        for dotted in lesson.apps:
            module, _, name = dotted.rpartition(".")
            app_class = getattr(importlib.import_module(module), name)
            if app_class in seen or (wanted and name not in wanted):
                continue
            seen.add(app_class)
            for control in controls(app_class()):
                app = _ready(app_class())
                prepare = PREPARE.get((name, control))
                for attribute, value in [prepare] if isinstance(prepare, tuple) else prepare or []:
                    getattr(app, attribute).value = value
                w = getattr(app, control)
                if getattr(w, "disabled", False):
                    print(f"{name}.{control}: skipped (disabled in the app's first state)")
                    continue

                def move(i, w=w):
                    values = offered(w)  # read now: some options follow other controls
                    current = w.value
                    k = values.index(current) if current in values else -1
                    w.value = values[(k + 1) % len(values)]

                label = f"{name}.{control}"
                if hasattr(app, "canvas"):
                    # every configuration a first visit for each control's cycle (results are remembered per
                    # configuration across apps and controls: widgets.common.remembered)
                    forget_remembered()
                    print(report(label, summarize(repeat(move, n)), 16))
                    forget_remembered()
                    print(report(f"(CPU time) {label}", summarize(repeat_cpu(move, n)), 16))
                    if control in getattr(app, "prepared_controls", ()):
                        # in a kernel: after each change the neighbouring values' results are computed in idle
                        # turns (LessonApp.prepare_neighbours) before the next change, as when a student pauses
                        # (the controls' rest before preparing, PREPARE_AFTER_S, set to 0: the next change is timed
                        # after the preparation, and its time is the work alone)
                        forget_remembered()
                        common.PREPARE_AFTER_S, rest = 0.0, common.PREPARE_AFTER_S
                        answered, prepared = repeat_in_event_loop(move, n, lambda app=app: app.preparing)
                        common.PREPARE_AFTER_S = rest
                        print(report(f"{label} (in a kernel, neighbours prepared)", summarize(answered), 16))
                        print(report(f"{label} (the neighbours prepared, in idle turns)", summarize(prepared)))
                    app.close()
                    continue
                # a picture drawn in the browser: timed inside an event loop, as the kernel runs the callback; a
                # control that needs new physics answers with the current position and fills the rest in later turns
                # (widgets.common.fill_in_turns), which are reported apart
                filling = lambda app=app: getattr(app, "filling", None)  # noqa: E731
                answered, filled = repeat_in_event_loop(move, n, filling)
                print(report(f"{label} (answered)", summarize(answered), 16))
                answered_cpu, _ = repeat_in_event_loop(move, n, filling, clock=time.process_time)
                print(report(f"(CPU time) {label} (answered)", summarize(answered_cpu), 16))
                print(report(f"{label} (the rest filled, in later turns)", summarize(filled)))
                app.close()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", help="app names to time (default: every app)")
    main(apps=",".join(parser.parse_args().apps) or None)
