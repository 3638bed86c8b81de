"""The bubble grid's result and the text under it (lesson 4): what the simulated step, its closed form and the
papers say, all read off distlab.pipeline. Used by distlab.widgets.pipeline (the grid and the stage analysis)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import pipeline
from ..units import format_bytes, format_percent

__all__ = ["BubbleGridResult", "describe"]


@dataclass(frozen=True)
class BubbleGridResult:
    """What the bubble-grid app shows: the simulated step, its closed form (None for the schedules after 1F1B,
    which have none; ``published`` then holds the papers' statement) and the memory it implies."""

    timeline: pipeline.Timeline
    closed_form: pipeline.ClosedForm | None
    memory: pipeline.StageActivations
    published: str = ""


def describe(r: BubbleGridResult) -> str:
    """The numbers under the bubble grid, all read off the simulated timeline (and its closed form). Lesson 4."""
    tl, cf, act = r.timeline, r.closed_form, r.memory
    p, m, v = tl.stages, tl.microbatches, tl.chunks
    setup = f"{tl.schedule}, p={p}, m={m}" + (f", v={v}" if v > 1 else "")
    closed = (
        f"closed form {format_percent(cf.bubble_fraction)}"
        if cf is not None
        else "no closed form for general t_F, t_B, t_W"
    )
    lines = [
        f"{setup}: step {tl.step_time:.4g} x t_F, ideal {float(tl.busy.max()):.4g} x t_F (the busiest stage's "
        f"compute; t_F = one stage's forward of one microbatch) [pipeline.schedule]",
        f"bubble: {format_percent(tl.bubble_fraction)} of the step idle, all stages together "
        f"({closed}); time added over ideal: {format_percent(tl.overhead)} "
        "[pipeline.schedule, pipeline.closed_form]",
        *(
            []
            if cf is not None
            else [
                f"idle inside a stage's own span (the papers' bubble, steps overlapping): at most "
                f"{float(tl.span_idle.max()):.4g} x t_F [Timeline.span_idle]; {r.published}"
            ]
        ),
        "peak microbatches in flight per stage: " + _compact(tl.peak_in_flight_w) + " [pipeline.schedule]",
        f"peak activation memory: {format_bytes(act.peak_bytes)} on stage {act.peak_stage} "
        f"({act.layers_per_stage[act.peak_stage]} layers x {act.in_flight[act.peak_stage]:g} in flight x "
        f"{format_bytes(act.per_layer_bytes)} per layer; {act.config['model']}, one "
        f"{act.config['seq_len']}-token sequence per microbatch, recompute={act.config['recompute']}) "
        "[pipeline.activation_memory]",
    ]
    return "\n".join(lines)


def _published(kind: str, p: int, t_b: float, t_w: float) -> str:
    """What the papers state for a schedule after 1F1B, at these times (t_F = 1)."""
    if kind == "zb-v":
        return (
            "Qi et al. 2024: zero with t_F = t_B = t_W and m >= 2p-1, at 1F1B's activation memory; "
            "2 chunks per stage, twice 1F1B's p2p traffic"
        )
    if kind == "dualpipe" and p % 2:
        return "DualPipe needs an even p"
    v_shape = kind == "dualpipe-v"
    bound = pipeline.dualpipe_bubble_time(p, 1.0, t_b, t_w, v_shape=v_shape)
    # the table's terms in this grid's: its B is the whole backward (B + W here), F&B = F + B (no overlap gain);
    # DualPipe-V counts PP = 2p half-stage chunks, so F, B and W are halved (pipeline.dualpipe_bubble_time)
    share, pp = (0.5, 2 * p) if v_shape else (1.0, p)
    f, full, w = share, (t_b + t_w) * share, t_w * share
    chunks = f"PP = 2p = {pp} half-stage chunks, so F = {f:g}; " if v_shape else f"PP = p = {pp}, F = 1; "
    whole = "(B + W)/2 here" if v_shape else "B + W here"
    copies = "2x parameters (two model copies)" if kind == "dualpipe" else "1x parameters"
    return (
        f"DeepSeek-V3 Table 2: (PP/2-1)(F&B+B-3W) = {pp / 2 - 1:g} x ({f + full:.4g} + {full:.4g} - 3 x {w:.4g}) "
        f"= {bound:.4g} x t_F ({chunks}the table's B is the whole backward, {whole}, = {full:.4g}, "
        f"and F&B = F + B, no overlap gain); {copies}, PP+1 activations"
    )


def _compact(values) -> str:
    text = [f"{x:g}" for x in values]
    if len(text) > 8:
        text = text[:4] + ["..."] + text[-3:]
    return ", ".join(text)
