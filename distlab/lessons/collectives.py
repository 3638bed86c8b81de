"""Graded questions of lesson 2, collectives and the ring all-reduce. Expected values come from distlab.collectives."""

from __future__ import annotations

from .. import collectives, hardware
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion, SequenceQuestion

__all__ = ["SMALL", "LARGE", "SMALL_VARIANTS", "LARGE_VARIANTS", "QUESTIONS"]

_BYTES_HINT = {1e9: "looks like bytes, but plain numbers are read in GB (write '7e9 B' or 7)"}


def _ring(size, gpus, link=None):
    if link is None:
        return collectives.collective_cost("all-reduce", size, gpus, bandwidth=1.0)
    return collectives.collective_cost("all-reduce", size, gpus, link=link)


#: q1, q2: a 4 GB gradient over 8 GPUs; q3, q6: 13B bf16 gradients (26 GB) over 8 GPUs (the lesson works 7B's 14 GB)
SMALL = dict(gb=4, n=8)
LARGE = dict(gb=26, n=8)
#: q4: the crossover of a 16-GPU ring on InfiniBand NDR (the lesson works 8 GPUs)
Q4_GPUS = 16
#: per-student variants (distlab.lessons.variants): the same choices in q1 and q2 (q3 and q6) draw the same number
SMALL_VARIANTS = dict(gb=(2, 4, 6, 8, 12))
LARGE_VARIANTS = dict(n=(2, 4, 8))


def _q1(gb, n):
    return _ring(gb * 1e9, n).bytes_sent_per_gpu / 1e9


def _explain_q1(gb, n):
    cost = _ring(gb * 1e9, n)
    return (
        f"2(N-1)/N x M = 2 x {n - 1}/{n} x {gb:g} GB = {format_bytes(cost.bytes_sent_per_gpu)}: {cost.steps} steps "
        f"(reduce-scatter then all-gather), each sending one chunk of M/N = {gb / n:g} GB"
    )


def _ps(gb, n):
    return collectives.collective_cost("all-reduce", gb * 1e9, n, algorithm="parameter-server", bandwidth=1.0)


def _q2(gb, n):
    return _ps(gb, n).bytes_sent_per_gpu / 1e9


def _explain_q2(gb, n):
    ps, ring = _ps(gb, n), _ring(gb * 1e9, n)
    return (
        f"The server pulls M from each of the N-1 = {n - 1} workers and sends the sum back to each: it sends "
        f"(N-1) x M = {format_bytes(ps.bytes_sent_per_gpu)} (and receives as much), "
        f"{ps.bytes_sent_per_gpu / ring.bytes_sent_per_gpu:g} times what a GPU of the ring sends "
        f"({format_bytes(ring.bytes_sent_per_gpu)})"
    )


def _q3(gb, n):
    return _ring(gb * 1e9, n, "nvlink4").time_s * 1e3


def _explain_q3(gb, n):
    cost = _ring(gb * 1e9, n, "nvlink4")
    link = hardware.link("nvlink4")
    return (
        f"bandwidth term 2(N-1)/N x M / B = {2 * (n - 1) / n * gb:g} GB / {link.bandwidth / 1e9:g} GB/s = "
        f"{format_seconds(cost.bandwidth_time_s)}; latency term 2(N-1) alpha = {2 * (n - 1)} x "
        f"{format_seconds(link.latency)} = {format_seconds(cost.latency_time_s)}; total "
        f"{format_seconds(cost.time_s)}. 900 GB/s on the datasheet is both directions added: 450 GB/s each way"
    )


def _q4():
    return collectives.latency_bandwidth_crossover("all-reduce", Q4_GPUS, link="ib-ndr") / 1e6


def _explain_q4():
    link = hardware.link("ib-ndr")
    m = collectives.latency_bandwidth_crossover("all-reduce", Q4_GPUS, link="ib-ndr")
    return (
        f"2(N-1) alpha = 2(N-1)/N x M / B gives M = N x alpha x B = {Q4_GPUS} x {link.latency * 1e6:g} us x "
        f"{link.bandwidth / 1e9:g} GB/s = {format_bytes(m)}: smaller messages are latency-bound, "
        f"larger ones bandwidth-bound"
    )


def _q5():
    """(b) unless the per-GPU bytes of a ring all-reduce grow or shrink several-fold from 8 to 64 GPUs."""
    ratio = _ring(4e9, 64).bytes_sent_per_gpu / _ring(4e9, 8).bytes_sent_per_gpu
    return "b" if 0.5 < ratio < 2 else ("a" if ratio >= 2 else "c")


def _explain_q5():
    eight, sixty_four = _ring(4e9, 8), _ring(4e9, 64)
    return (
        f"(b). With a ring each GPU sends 2(N-1)/N x M, {format_bytes(eight.bytes_sent_per_gpu)} at N = 8 and "
        f"{format_bytes(sixty_four.bytes_sent_per_gpu)} at N = 64, never more than 2 x M: the chunks shrink as M/N "
        f"but there are 2(N-1) of them. The total over all GPUs grows with N, the load per GPU does not"
    )


def _gradient_sync_primitive():
    """The primitive after which every GPU holds the sum of all GPUs' gradients, found by simulating each."""
    grads = [[1.0, 2.0], [10.0, 20.0]]
    total = [11.0, 22.0]
    outputs = {
        "b": collectives.simulate_ring_all_reduce(grads).outputs,
        "c": collectives.simulate_all_gather([[1.0], [10.0]]).outputs,
        "d": collectives.simulate_reduce_scatter(grads).outputs,
    }
    (answer,) = [k for k, out in outputs.items() if all(list(map(float, o)) == total for o in out)]
    return answer


def _ring_sends(gpu, n):
    """The chunks `gpu` sends, step by step, in distlab's simulated ring all-reduce of N chunks."""
    import numpy as np

    trace = collectives.simulate_ring_all_reduce(np.zeros((n, n)))
    return [int(c) for c in trace.send_chunk[:, gpu]]


def _explain_q8(gpu, n):
    sends = _ring_sends(gpu, n)
    return (
        f"Each step GPU g passes on the chunk it has just received (after adding its own copy during the "
        f"reduce-scatter), so the chunk index falls by one per step: chunk (g - 1 - k) mod N at step k. GPU {gpu}: "
        f"reduce-scatter {sends[: n - 1]}, after which it holds the full sum of chunk {gpu}; all-gather "
        f"{sends[n - 1 :]}, starting with that chunk. 2(N-1) = {2 * (n - 1)} sends in all"
    )


def _q8_mistakes(gpu, n):
    return {
        tuple((gpu - k) % n for k in range(2 * (n - 1))): "starts by sending its own chunk: in the reduce-scatter "
        "a GPU passes on the chunk its neighbour adds to next; the chunk it ends up owning is the one it receives last",
        tuple((gpu + 1 + k) % n for k in range(2 * (n - 1))): "runs the ring backwards: a GPU sends to g+1, so the "
        "chunk it forwards is the one it received from g-1, one index lower each step",
        tuple([(gpu - 1 - k) % n for k in range(n - 1)] * 2): "repeats the reduce-scatter order: the all-gather "
        "starts with the chunk the GPU now owns in full",
    }


def _q6(gb, n):
    return _ring(gb * 1e9, n, "ib-ndr").time_s / _ring(gb * 1e9, n, "nvlink4").time_s


def _explain_q6(gb, n):
    ib, nv = _ring(gb * 1e9, n, "ib-ndr"), _ring(gb * 1e9, n, "nvlink4")
    return (
        f"The same bytes at 50 GB/s instead of 450 GB/s per direction: {format_seconds(ib.time_s)} / "
        f"{format_seconds(nv.time_s)} = {ib.time_s / nv.time_s:.3g} (the ratio of the bandwidths, 9, "
        f"because {gb:g} GB is far above both crossovers)"
    )


q1 = NumericQuestion(
    name="q1",
    params=SMALL,
    variants=SMALL_VARIANTS,
    prompt="Ring all-reduce of a {gb:g} GB gradient over N = {n} GPUs: how many GB does each GPU send in total?",
    expected=_q1,
    explain=_explain_q1,
    hint_text="the ring runs a reduce-scatter and an all-gather, N-1 steps each, one chunk of M/N per step",
    unit="GB",
    noun="an amount of data",
    scale_hint=lambda gb, n: {
        **_BYTES_HINT,
        n / (n - 1): "is 2 x M: the ring sends 2(N-1)/N x M, a little less",
        n / (2 * (n - 1)): "is M: count both phases, reduce-scatter and all-gather",
    },
)

q2 = NumericQuestion(
    name="q2",
    params=SMALL,
    variants=SMALL_VARIANTS,
    prompt="Parameter server (one of the {n} GPUs), {gb:g} GB gradients: how many GB does the server send per "
    "all-reduce?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="the server sends the summed gradient back to every worker",
    unit="GB",
    noun="an amount of data",
    scale_hint=lambda gb, n: {**_BYTES_HINT, n / (n - 1): f"counts N workers; the server is one of the {n} GPUs"},
)

q3 = NumericQuestion(
    name="q3",
    params=LARGE,
    variants=LARGE_VARIANTS,
    prompt="How long (ms) does a ring all-reduce of {gb:g} GB (13B bf16 gradients) over {n} GPUs take on NVLink 4?",
    expected=_q3,
    explain=_explain_q3,
    hint_text="time = 2(N-1) alpha + 2(N-1)/N x M / B, with B the per-direction bandwidth of the link",
    unit="ms",
    noun="a time",
    scale_hint={
        0.5: "uses 900 GB/s: that datasheet figure adds both directions; a GPU sends 450 GB/s",
        1e-3: "looks like seconds; plain numbers are read in ms",
    },
)

q4 = NumericQuestion(
    name="q4",
    prompt=f"Ring all-reduce over {Q4_GPUS} GPUs on InfiniBand NDR: above which message size (MB) does bandwidth dominate latency?",
    expected=_q4,
    explain=_explain_q4,
    hint_text="set the latency term 2(N-1) alpha equal to the bandwidth term 2(N-1)/N x M / B and solve for M",
    unit="MB",
    noun="an amount of data",
    scale_hint={1e6: "looks like bytes; plain numbers are read in MB"},
)

q5 = ChoiceQuestion(
    name="q5",
    prompt="A ring all-reduce of M bytes grows from 8 to 64 GPUs. What happens to the bytes EACH GPU sends? (a) they "
    "grow about 8x; (b) they stay about the same, just under 2M; (c) they shrink about 8x, since the chunks are "
    "M/N; (d) they double. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q5,
    explain=_explain_q5,
    hint_text="write the bytes per GPU as (number of steps) x (chunk size) and compare 2(N-1)/N at N = 8 and N = 64",
    feedback={
        "a": "is the parameter server's growth (it sends N-1 copies); in a ring every GPU sends only to its neighbour",
        "c": "counts the smaller chunks but not the larger number of steps: 2(N-1) steps of M/N each",
        "d": "confuses the two phases with growth: the two phases (2x) are there at 8 GPUs too",
    },
)

q6 = NumericQuestion(
    name="q6",
    params=LARGE,
    variants=LARGE_VARIANTS,
    prompt="The {gb:g} GB all-reduce over {n} GPUs: how many times longer does it take on InfiniBand NDR than on "
    "NVLink 4?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="compare the per-direction bandwidths (the bytes are the same); latency hardly matters at {gb:g} GB",
    unit="",
    noun="a ratio",
)

q7 = ChoiceQuestion(
    name="q7",
    prompt="In data parallelism each GPU computes gradients on its own shard of the batch. Which "
    "primitive leaves every GPU with the full-batch gradient, so all models take the same step? (a) broadcast; "
    "(b) all-reduce; (c) all-gather; (d) reduce-scatter; (e) all-to-all. Answer a-e.",
    options=("a", "b", "c", "d", "e"),
    expected=_gradient_sync_primitive,
    explain=lambda: (
        "(b) all-reduce: every GPU ends with the sum of every GPU's gradient (a reduce-scatter then an "
        "all-gather in the ring). Reduce-scatter leaves each GPU only its shard of the sum (ZeRO-2/3), all-gather "
        "concatenates without summing, broadcast copies one GPU's data, all-to-all exchanges different pieces (MoE "
        "dispatch), summing nothing."
    ),
    hint_text="which primitive both sums over GPUs and leaves the whole result on every GPU?",
    feedback={
        "a": "copies one GPU's tensor to all; it sums nothing (a parameter server broadcasts only after it has summed)",
        "c": "concatenates the GPUs' pieces without adding them: ZeRO-3 uses it to gather weights",
        "d": "sums, but leaves each GPU only 1/N of the result: ZeRO-2/3 stop there because each GPU updates its shard",
        "e": "sends each GPU a different piece and sums nothing; it dispatches tokens to experts in MoE",
    },
)

q8 = SequenceQuestion(
    name="q8",
    params=dict(gpu=2, n=4),
    variants=dict(gpu=(1, 2, 3), n=(4, 6, 8)),
    prompt="Write the ring's send schedule. N = {n} GPUs, each sends to GPU (g+1) mod N; the gradient is cut into "
    "chunks 0..N-1. In the first step of the reduce-scatter GPU g sends chunk (g-1) mod N. List the chunk GPU {gpu} "
    "sends at every step of the whole all-reduce (reduce-scatter, then all-gather), e.g. [3, 2, ...].",
    expected=_ring_sends,
    explain=_explain_q8,
    hint_text="after the first step a GPU forwards what it has just received; at the end of the reduce-scatter each "
    "GPU owns one fully summed chunk, and the all-gather begins by sending it",
    noun="a list of chunk indices",
    feedback=_q8_mistakes,
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
