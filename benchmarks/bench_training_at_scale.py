"""Lesson 11: every control of the four apps, from a control change to the redrawn figure (target <= 16 ms median).

Each sample sets one control, which runs the observer -> distlab (pipeline, fsdp, production, failures) -> the
artists' in-place update -> the render (a blit, or a full draw when an axis range changes) and the PNG diff ipympl
sends, all inside the timed span. As in the other benchmarks, the front end's "initialized" message is replayed
first.
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def _ready(app):
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    return app


def _cycle(app, control, values, n):
    def step(i):
        value = values[(i + 1) % len(values)]
        if control.value == value:
            value = values[(i + 2) % len(values)]
        control.value = value

    return summarize(repeat(step, n))


def main(n: int = 60) -> dict:
    from distlab.widgets.training_at_scale import CheckpointApp, ContextApp, FsdpApp, ScheduleApp

    results = {}

    def run(name, app, control, values):
        stats = _cycle(app, control, values, n)
        results[name] = stats
        print(report(name, stats, 16))

    app = _ready(ScheduleApp(stages=8, microbatches=32))
    run("schedule: kind", app, app.kind, ["1f1b", "zb-h1", "zb-v", "dualpipe-v", "dualpipe"])
    run("schedule: p slider 2..16", app, app.stages, [2, 4, 6, 8, 10, 12, 14, 16])
    run("schedule: m slider 33..64", app, app.microbatches, list(range(33, 65)))
    run("schedule: B:F slider", app, app.backward, [0.5, 1.0, 1.5, 2.0])
    run("schedule: W:F slider", app, app.weight, [0.0, 0.5, 1.0, 1.5])

    app = _ready(FsdpApp())
    run("fsdp: nodes", app, app.nodes, [1, 2, 4, 8, 16, 32])
    run("fsdp: sharding", app, app.sharding, ["full", "hybrid"])
    run("fsdp: prefetch", app, app.prefetch, [0, 1, 2, 3, 4])
    run("fsdp: reshard", app, app.reshard, [True, False])
    run("fsdp: model", app, app.model, ["llama2-7b", "llama3.1-8b", "llama2-13b", "llama3.1-70b"])
    run("fsdp: fabric", app, app.fabric, ["ib-ndr", "ib-hdr", "ethernet-100g"])
    run("fsdp: sequences", app, app.micro, [1, 2, 4, 8])

    app = _ready(ContextApp())
    run("context: cp", app, app.cp, [2, 4, 8, 16, 32, 64, 128])
    run("context: tp", app, app.tp, [1, 2, 4, 8])
    run("context: tokens", app, app.seq_len, [8192, 32768, 131072, 524288, 1048576])
    run("context: link", app, app.link, ["nvlink4", "ib-ndr", "ethernet-100g"])
    run("context: model", app, app.model, ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "llama2-7b"])

    app = _ready(CheckpointApp())
    run("checkpoint: GPUs", app, app.gpus, [256, 1024, 4096, 16384, 32768, 65536, 131072])
    run("checkpoint: failure rate", app, app.rate, [1e-6, 3e-6, 1e-5, 2e-5, 5e-5, 1e-4])
    run("checkpoint: storage", app, app.storage, [0.1, 0.3, 1.0, 2.0, 5.0])
    run("checkpoint: mode", app, app.mode, ["sync", "async", "in-memory"])
    run("checkpoint: restart", app, app.restart, [0.0, 5.0, 10.0, 30.0])
    run("checkpoint: model", app, app.model, ["llama3.1-8b", "llama3.1-70b", "llama3.1-405b"])
    return results


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
