"""The bubble grid's state (lesson 4): which chunks v a schedule runs, what chunks v shows and how a change moves
it, when the slider is disabled and which states draw no grid. Pure functions of a state {control: value}, shared by
distlab.widgets.pipeline's apps and the browser's cache of neighbouring states (distlab.widgets.prefetch)."""

from __future__ import annotations

from .. import models, pipeline

__all__ = ["GRID_CONTROLS", "used_chunks", "chunks_unused", "grid_neighbour", "grid_disabled", "grid_refusal"]

#: The bubble grid's controls whose labels key the browser's cache (distlab.widgets.prefetch), in the picture's
#: order; a state is these values (the microbatch count is the picture's own slider).
GRID_CONTROLS = ("kind", "stages", "chunks", "backward", "weight", "model", "recompute")


def used_chunks(kind: str, chunks: int) -> int:
    """The model chunks per stage schedule `kind` runs with chunks v set to `chunks`: v for the interleaved schedule,
    2 for ZB-V and the DualPipes (their V or two copies), 1 for the others."""
    return chunks if kind == "interleaved" else 1 if pipeline.placement(kind) == "loop" else 2


def chunks_unused(kind: str) -> str:
    """The tooltip of chunks v where it is disabled (it shows the chunks `kind` runs: used_chunks)."""
    v = used_chunks(kind, 1)
    return f"chunks v apply to the interleaved schedule only: {kind} runs {v} model chunk{'s' * (v > 1)} per stage"


def grid_neighbour(s: dict, name: str, value) -> dict:
    """The state after the student sets control `name` to `value` in state `s`, as the app's observer leaves it:
    chunks v shows the chunks the schedule runs (used_chunks), the student's v ("chosen_chunks", kept in the state)
    where it applies (lesson 4 showed v = 2, greyed, beside 1F1B's grid of one chunk per stage)."""
    chosen = value if name == "chunks" else s.get("chosen_chunks", s["chunks"])
    t = {**s, name: value, "chosen_chunks": chosen}
    t["chunks"] = used_chunks(t["kind"], chosen)
    return t


def grid_disabled(s: dict) -> list:
    """The disabled state of each GRID_CONTROLS control in state `s`, None where the app never disables it: chunks v
    applies to the interleaved schedule only (the app's _on_change sets it; a cached change's payload carries it, so
    the browser disables the slider at once: browser_js/prefetch.js)."""
    return [s["kind"] != "interleaved" if name == "chunks" else None for name in GRID_CONTROLS]


def grid_refusal(s: dict) -> str | None:
    """Why state `s` (its kind, stages, chunks and model) draws no grid at any microbatch count: a schedule of v > 1
    model chunks per stage (interleaved: chunks v; zb-v and the DualPipes: 2) whose stages' layers do not split into
    v equal chunks (pipeline.activation_memory refuses it); None where they do. The app offers no schedule or model
    that this refuses (controls.offer_what_runs: lesson 4 offered Llama-3.1-405B at interleaved, 4 stages, v = 2,
    and answered '[32, 32, 31, 31]' with our error)."""
    v = used_chunks(s["kind"], s["chunks"])
    m = models.model(s["model"])
    per_stage = pipeline.split_layers(m.layers, s["stages"])
    if not any(n % v for n in per_stage):
        return None
    return f"{m.name}'s {m.layers} layers over {s['stages']} stages, {list(per_stage)}, do not split into {v} chunks"
