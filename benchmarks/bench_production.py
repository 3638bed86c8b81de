"""Lesson 8 apps: time from a control change to the redrawn figure, median and p95.

The bucket slider (a new timeline over the cached sweep: a blit), the bucket app's fabric (a new sweep of 2,000
bucket counts, its curve repainted over the fixed axes), the production app's taper slider (two estimates and the
straggler integral), and the triage app's ZeRO stage (the triage re-runs estimate() for every single fix and every
ladder rung; its bars are drawn in the browser, so the kernel's part is the triage and one message). Each runs the
observer -> distlab.production -> in-place artist update -> render + ipympl's PNG diff inside the timed span, after
replaying the front end's "initialized" message (bench_memory_widget.py). Plus the library calls alone.
"""

from __future__ import annotations

from _timing import repeat, report, summarize


def _ready(app):
    if not hasattr(app, "canvas"):  # drawn in the browser (the triage ladder): the kernel side is what is timed
        return app
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    return app


def main(n: int = 200) -> None:
    from distlab import dataparallel, hardware, production, triage
    from distlab.widgets.production import BucketApp, ProductionStepApp, TriageApp

    bucket = _ready(BucketApp())
    counts = [16, 64, 256, 614, 1000]
    fabrics = ["ib-ndr", "ib-hdr", "ethernet-100g"]

    def slider(i):
        bucket.buckets.value = counts[i % len(counts)]

    def fabric(i):
        bucket.link.value = fabrics[(i + 1) % len(fabrics)]

    step = _ready(ProductionStepApp())
    tapers = [1.0, 1.5, 2.0, 3.0]

    def taper(i):
        step.oversubscription.value = tapers[(i + 1) % len(tapers)]

    def jitter(i):
        step.jitter.value = [0.0, 0.02, 0.05][(i + 1) % 3]

    triage_app = _ready(TriageApp())

    def zero(i):
        triage_app.zero.value = (i + 1) % 4

    print(report("bucket app: bucket slider", summarize(repeat(slider, n)), 16))
    print(report("bucket app: fabric (new 2,000-count sweep)", summarize(repeat(fabric, n // 2)), 16))
    print(report("production app: taper slider", summarize(repeat(taper, n)), 16))
    print(report("production app: jitter slider", summarize(repeat(jitter, n)), 16))
    print(report("triage app: ZeRO stage (fixes + ladder)", summarize(repeat(zero, n // 2)), 16))
    grad = dataparallel.gradient_bytes("llama2-7b")
    back = production.backward_time("llama2-7b", 4096)
    kw = dict(link="nvlink4", algorithm="hierarchical", gpus_per_node=8, inter_link="ib-ndr")
    print(report("(reference) bucket_sweep, 2,000 counts", summarize(repeat(
        lambda i: production.bucket_sweep(grad, back, 64, max_buckets=2000, **kw), n))))
    cl = hardware.cluster("dgx-h100", 32)
    cfg = dict(global_batch=256, seq_len=8192, tp=8, pp=4, micro_batch_size=4, sequence_parallel=True)
    print(report("(reference) triage.oom_triage, Llama-3.1-70B on 256 GPUs", summarize(repeat(
        lambda i: triage.oom_triage("llama3.1-70b", cl, **cfg), n // 2))))
    print(report("(reference) expected_slowest, 256 GPUs, one slow", summarize(repeat(
        lambda i: production.expected_slowest(256, 0.02, 1.2), n))))
    print(report("(reference) simulate_slowest, 4,096 GPUs x 1,000 steps", summarize(repeat(
        lambda i: production.simulate_slowest(4096, 0.05, steps=1000, seed=i), 10))))


if __name__ == "__main__":
    from _timing import no_arguments

    no_arguments(__doc__)
    main()
