"""The pictures drawn in the browser keep working with no kernel (issue 20): a notebook executed without a browser
(nbconvert --execute, as the committed lessons are) saves, in its widget state, every position each picture's
slider can reach, so an export to HTML (tests/test_browser.py opens one) shows them all.

In a kernel the positions other than the current one are filled in the event loop's later turns
(widgets.common.fill_in_turns); nbconvert records only what a cell sends before it is reported done, so a fill
that a cell started is finished when that cell ends (widgets.common.finish_cell_fills)."""

from __future__ import annotations

import asyncio
import importlib
import json
import pkgutil
import warnings
from pathlib import Path

import nbformat
import pytest
from hypothesis import given, settings, strategies as st
from nbclient import NotebookClient

from distlab import widgets
from distlab.widgets import browser, common

ROOT = Path(__file__).resolve().parents[2]
STATE = "application/vnd.jupyter.widget-state+json"


def _pending_texts() -> set[str]:
    """What a picture shows at a position not computed yet: the PENDING text of every widget module."""
    with warnings.catch_warnings():  # the old module names (widgets.mesh, widgets.zero) warn on import
        warnings.simplefilter("ignore", DeprecationWarning)
        modules = [importlib.import_module(f"distlab.widgets.{m.name}") for m in pkgutil.iter_modules(widgets.__path__)]
    return {m.PENDING for m in modules if isinstance(getattr(m, "PENDING", None), str)}


PENDING = _pending_texts()
#: The pictures' own modules (common.js is prepended to each by browser.module_source).
_MODULE_FILES = sorted(
    p.name for p in (ROOT / "distlab" / "widgets" / "browser_js").glob("*.js") if p.name != browser.COMMON_MODULE
)


def _pictures(nb: dict) -> list[dict]:
    """The saved state of every browser picture (an anywidget model with per-position summaries) of a notebook."""
    state = nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
    return [m["state"] for m in state.values() if m["model_name"] == "AnyModel" and "summaries" in m["state"]]


def _missing_positions(picture: dict) -> list[int]:
    """The positions (slider values) whose text or drawing data the saved state lacks; [] when it has them all."""
    values = picture.get("options") or list(range(picture["min"], picture["max"] + 1))
    summaries, errors, frames = picture["summaries"], picture["errors"], picture["frames"]
    assert len(summaries) == len(errors) == len(values), "one summary and one error per position"
    assert picture["value"] in values
    missing = []
    for i, value in enumerate(values):
        text, error = summaries[i], errors[i]
        drawn = True
        if not error and "bars" in frames:  # the memory bars (lessons 1 and 3): bars of every GPU count
            drawn = len(frames["bars"][i]) > 0
        if not error and "positions" in frames:  # the bubble grid (lesson 4): [first op, op count, step, ideal]
            drawn = frames["positions"][i][1] > 0
        if not error and "step" in frames:  # the training lab (lesson 7): memory and step-time bars of every count
            # (no step-time bar where the layout cannot run: issue 31)
            drawn = len(frames["memory"][i]) > 0 and (len(frames["step"][i]) > 0 or not frames["runs"][i])
        if text in PENDING or not (text or error) or not drawn:
            missing.append(value)
    return missing


def test_pending_texts_are_found():
    # the four apps that fill in later turns: memory wall, ZeRO bars, bubble grid, 3D grid (two share one text)
    assert len(PENDING) >= 3 and all(text.endswith("...") for text in PENDING)


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_committed_lessons_save_every_position_of_their_pictures(name):
    nb = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    for picture in _pictures(nb):
        assert _missing_positions(picture) == [], f"{name}: {picture['description']!r} saved without these positions"


def test_lessons_with_pictures_have_them_in_their_saved_state():
    # lessons 1, 2, 3, 4 and 6 draw a picture in the browser (issue 20's five), and lesson 7 its lab's bars (lesson
    # 12 builds the same lab), and lesson 8b its triage ladder: each is saved with the notebook, with the module the
    # package ships today (an export runs the saved module, so a notebook saved before a fix to the drawing code would
    # show the old drawing)
    for name in (
        "01_memory_wall",
        "02_collectives",
        "03_data_parallel_zero",
        "04_pipeline",
        "06_3d_parallelism",
        "07_training_lab",
        "08b_failure_triage",
        "12_capstone",
    ):
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
        pictures = _pictures(nb)
        assert len(pictures) == 1, name
        shipped = {browser.module_source(module) for module in _MODULE_FILES} | {
            browser.module_source(browser.PREFETCH_MODULE, module) for module in _MODULE_FILES
        }
        assert pictures[0]["_esm"] in shipped, f"{name}: saved with drawing code the package no longer ships"


def test_a_notebook_executed_without_a_browser_saves_every_position():
    # The apps whose other positions a kernel fills in later turns, built in cells as their lessons build them;
    # the second cell moves a control, as lessons 1 and 3 do, which starts a new fill from that cell.
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(source)
        for source in (
            "from distlab.widgets.memory_wall import MemoryWallApp\n"
            'wall = MemoryWallApp(model="llama2-7b", gpu="h100-sxm", gpus=8, zero=0)\nwall',
            "wall.zero.value = 3",
            "from distlab.widgets.data_parallel_zero import ZeroMemoryApp\n"
            'zero = ZeroMemoryApp(model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr")\nzero',
            'from distlab.widgets.pipeline import BubbleGridApp\nBubbleGridApp(kind="1f1b", stages=4, microbatches=8)',
            "from distlab.widgets.parallelism_3d import MeshApp\n"
            'MeshApp(dp=4, tp=4, pp=4, gpus_per_node=8, colour_by="dp")',
            "from distlab.widgets.training_lab import TrainingLabApp\nTrainingLabApp()",
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    pictures = _pictures(nb)
    assert len(pictures) == 5
    for picture in pictures:
        assert _missing_positions(picture) == [], picture["description"]
    # the memory wall's text is that of ZeRO-3 (the second cell's change), at every GPU count
    wall = next(p for p in pictures if p["description"] == "GPUs")
    assert all("ZeRO-3" in text for text, error in zip(wall["summaries"], wall["errors"]) if not error)


class _Kernel:
    def __init__(self, msg_type: str):
        self.msg_type = msg_type

    def get_parent(self):
        return {"header": {"msg_type": self.msg_type}}


class _Events:
    def __init__(self):
        self.callbacks: dict = {"post_run_cell": []}

    def register(self, event: str, function) -> None:
        self.callbacks[event].append(function)


class _Shell:
    """What fill_in_turns asks of IPython: the kernel's current request and the events to register with."""

    def __init__(self, msg_type: str):
        self.kernel = _Kernel(msg_type)
        self.events = _Events()


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(1, 40), msg_type=st.sampled_from(["execute_request", "comm_msg"]))
def test_a_cells_fill_ends_with_the_cell_and_a_controls_fill_in_later_turns(steps, msg_type):
    # A fill of `steps` turns started in a kernel, by a cell (execute_request) or by a control's message (comm_msg).
    # When the cell ends (IPython's post_run_cell), a cell's fill is complete before the loop turns again; a
    # control's is not touched then, and completes in the loop's later turns, one step a turn. Either way step()
    # runs exactly `steps` times (never again once it has said False).
    import IPython

    shell = _Shell(msg_type)
    calls = []

    def step() -> bool:
        calls.append(1)
        return len(calls) < steps

    async def cell():
        done = common.fill_in_turns(step)
        for callback in shell.events.callbacks["post_run_cell"]:  # what IPython does at the cell's end
            callback(None)
        ended = (len(calls), done.done())
        await done
        for _ in range(3):  # later turns: nothing more
            await asyncio.sleep(0)
        return ended

    original = IPython.get_ipython
    IPython.get_ipython = lambda: shell
    try:
        ended = asyncio.run(cell())
    finally:
        IPython.get_ipython = original
    if msg_type == "execute_request":
        assert ended == (steps, True)
        assert shell.events.callbacks["post_run_cell"] == [common.finish_cell_fills]
    else:
        assert ended == (0, False) and shell.events.callbacks["post_run_cell"] == []
    assert len(calls) == steps
