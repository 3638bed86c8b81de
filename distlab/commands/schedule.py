"""distlab schedule: a pipeline schedule as a stages x time grid, its bubble and peak memory (distlab.pipeline)."""

from __future__ import annotations

import json
import math

from ..errors import ConfigurationError
from .._words import counted

__all__ = ["NAME", "HELP", "parse_ratio", "add_arguments", "run"]

#: The widest line of the grid: the kit's limit for output text (tests/lessons/test_output_width.py; nothing is
#: printed in front of a grid row, so not units.TEXT_WIDTH's 100). A longer grid prints in blocks, one under the other.
GRID_WIDTH = 110

NAME = "schedule"
HELP = "pipeline schedule as a text grid (one row per stage), its bubble and in-flight microbatches"


def parse_ratio(text: str) -> tuple[float, float, float]:
    """'1:1:1' -> (1.0, 1.0, 1.0): the F:B:W cost ratio (B + W is the full backward)."""
    parts = str(text).replace(" ", "").split(":")
    if len(parts) != 3:
        raise ConfigurationError(
            f"--ratio {text!r} must be three numbers F:B:W, e.g. 1:1:1 (backward B + W = 2 x forward) or 1:2:0"
        )
    try:
        f, b, w = (float(x) for x in parts)
    except ValueError:
        raise ConfigurationError(f"--ratio {text!r}: F, B and W must be numbers, e.g. 1:1:1") from None
    if not all(math.isfinite(x) for x in (f, b, w)) or f <= 0 or b <= 0 or w < 0:
        raise ConfigurationError(
            f"--ratio {text!r}: F and B must be positive and W not negative (W = 0: no separate weight-gradient pass)"
        )
    return f, b, w


def add_arguments(cmd) -> None:
    from ..pipeline import KINDS

    cmd.add_argument("--kind", default="1f1b", help=f"schedule: {', '.join(KINDS)} (default 1f1b)")
    cmd.add_argument("--stages", "-p", type=int, default=4, help="pipeline stages p (default 4)")
    cmd.add_argument("--microbatches", "-m", type=int, default=8, help="microbatches per step m (default 8)")
    cmd.add_argument(
        "--chunks",
        "-v",
        type=int,
        default=1,
        help="model chunks per stage v, interleaved only; zb-v and dualpipe(-v) always run 2 (default 1)",
    )
    cmd.add_argument(
        "--ratio",
        default="1:1:1",
        help="F:B:W cost ratio: forward, input-gradient and weight-gradient backward; schedules other "
        "than zb-h1, zb-v, dualpipe(-v) run B and W as one backward op (default 1:1:1: backward = 2 x forward)",
    )
    cmd.add_argument(
        "--forward",
        default=None,
        help="duration of one stage's forward per microbatch, e.g. '2 ms' (default: times are in units "
        "of that forward, t_F = 1)",
    )
    cmd.add_argument("--p2p", default="0", help="latency added to every send between stages, same units (default 0)")
    cmd.add_argument(
        "--batch", type=int, default=None, help="samples one pipeline gets per step: microbatches must divide it"
    )
    cmd.add_argument(
        "--model", default=None, help="catalog model (e.g. llama2-7b): also print each stage's peak activation memory"
    )
    cmd.add_argument(
        "--micro-batch-size", type=int, default=1, help="sequences per microbatch, with --model (default 1)"
    )
    cmd.add_argument("--recompute", default="none", help="none (default), selective, full; with --model")
    cmd.add_argument(
        "--json",
        action="store_true",
        help="print a JSON object: bubble_fraction (idle share of the step, all stages together), "
        "step_time, the grid (one string per stage) and the op list",
    )


def run(args) -> int:
    from .. import pipeline
    from ..units import SECONDS, format_bytes, format_seconds, positive, to_base

    f, b, w = parse_ratio(args.ratio)
    unit = 1.0 if args.forward is None else positive(args.forward, SECONDS, "--forward")
    p2p = to_base(args.p2p, SECONDS, "--p2p")
    scale = unit / f  # F lasts `unit`; B and W keep their ratio to it
    timeline = pipeline.schedule(
        args.kind,
        args.stages,
        args.microbatches,
        args.chunks,
        t_f=f * scale,
        t_b=b * scale,
        t_w=w * scale,
        p2p=p2p,
        batch=args.batch,
    )
    act = None
    if args.model is not None:
        act = pipeline.activation_memory(
            timeline, args.model, micro_batch_size=args.micro_batch_size, recompute=args.recompute
        )
    closed = None
    if p2p == 0 and timeline.schedule not in pipeline.NO_CLOSED_FORM:
        closed = pipeline.closed_form(
            timeline.schedule, timeline.stages, timeline.microbatches, timeline.chunks, f * scale, b * scale, w * scale
        )

    if args.json:
        data = timeline.to_dict()
        data["ratio"] = {"F": f, "B": b, "W": w}
        data["time_unit"] = "s" if args.forward is not None else "t_F"
        data["closed_form_bubble_fraction"] = None if closed is None else closed.bubble_fraction
        if act is not None:
            data["activation_memory"] = act.to_dict()
        print(json.dumps(data, indent=2))
        return 0

    def when(t: float) -> str:
        return format_seconds(t) if args.forward is not None else f"{t:.4g} t_F"

    tl = timeline
    head = f"{tl.schedule}: p={counted(tl.stages, 'stage')}, m={counted(tl.microbatches, 'microbatch')}"
    if tl.chunks > 1:
        head += f", v={counted(tl.chunks, 'chunk')}"
    print(f"{head}, F:B:W = {f:g}:{b:g}:{w:g}" + (f", p2p {when(p2p)}" if p2p else ""))
    print(tl.grid(max_width=GRID_WIDTH))
    print(
        "(F forward, B backward"
        + (" input gradient, W weight gradient" if "W" in set(tl.kind.tolist()) else "")
        + (", .chunk" if tl.chunks > 1 else "")
        + ", '.' idle; one column = the shortest op)"
    )
    print(f"step time: {when(tl.step_time)}; busiest stage computes {when(float(tl.busy.max()))}")
    line = f"bubble: {100 * tl.bubble_fraction:.2f}% of the step idle (all stages together)"
    if closed is not None:
        line += f"; closed form {100 * closed.bubble_fraction:.2f}%"
    print(line)
    print(f"time added over ideal compute: {100 * tl.overhead:.2f}%")
    if tl.schedule in pipeline.NO_CLOSED_FORM:
        print(
            "idle inside each stage's own span (the papers' bubble): " + ", ".join(when(float(x)) for x in tl.span_idle)
        )
    print("idle per stage: " + ", ".join(f"{100 * x:.1f}%" for x in tl.stage_bubble))
    print("peak microbatches in flight per stage: " + ", ".join(f"{x:g}" for x in tl.peak_in_flight))
    if (tl.peak_in_flight_w != tl.peak_in_flight).any():
        print("  ... counted until their W pass ends: " + ", ".join(f"{x:g}" for x in tl.peak_in_flight_w))
    if act is not None:
        print(
            f"activation memory ({act.config['model']}, {act.config['micro_batch_size']} x {act.config['seq_len']} "
            f"tokens per microbatch, recompute={act.config['recompute']}):"
        )
        print(act.summary())
        print(f"peak: {format_bytes(act.peak_bytes)} on stage {act.peak_stage}")
    return 0
