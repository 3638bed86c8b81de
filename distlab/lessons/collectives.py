"""Graded questions of lesson 2, collectives and the ring all-reduce. Expected values come from distlab.collectives."""

from __future__ import annotations

from .. import collectives, hardware
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["SMALL", "LARGE", "SMALL_VARIANTS", "LARGE_VARIANTS", "QUESTIONS"]

_BYTES_HINT = {1e9: "looks like bytes, but plain numbers are read in GB (write '7e9 B' or 7)"}


def _ring(size, gpus, link=None):
    if link is None:
        return collectives.collective_cost("all-reduce", size, gpus, bandwidth=1.0)
    return collectives.collective_cost("all-reduce", size, gpus, link=link)


#: q1, q2: a 4 GB gradient over 8 GPUs; q3, q6: 7B bf16 gradients (14 GB) over 8 GPUs
SMALL = dict(gb=4, n=8)
LARGE = dict(gb=14, n=8)
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
    return collectives.latency_bandwidth_crossover("all-reduce", 8, link="ib-ndr") / 1e6


def _explain_q4():
    link = hardware.link("ib-ndr")
    m = collectives.latency_bandwidth_crossover("all-reduce", 8, link="ib-ndr")
    return (
        f"2(N-1) alpha = 2(N-1)/N x M / B gives M = N x alpha x B = 8 x {link.latency * 1e6:g} us x "
        f"{link.bandwidth / 1e9:g} GB/s = {format_bytes(m)}: smaller messages are latency-bound, "
        f"larger ones bandwidth-bound"
    )


def _q5():
    eight, sixty_four = _ring(4e9, 8), _ring(4e9, 64)
    return "yes" if sixty_four.bytes_sent_per_gpu > 2 * eight.bytes_sent_per_gpu else "no"


def _explain_q5():
    eight, sixty_four = _ring(4e9, 8), _ring(4e9, 64)
    return (
        f"No: with a ring each GPU sends 2(N-1)/N x M, {format_bytes(eight.bytes_sent_per_gpu)} at N = 8 and "
        f"{format_bytes(sixty_four.bytes_sent_per_gpu)} at N = 64, never more than 2 x M. The total over all GPUs "
        f"grows with N, the load per GPU does not"
    )


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
    prompt="How long (ms) does a ring all-reduce of {gb:g} GB (7B bf16 gradients) over {n} GPUs take on NVLink 4?",
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
    prompt="Ring all-reduce over 8 GPUs on InfiniBand NDR: above which message size (MB) does bandwidth dominate latency?",
    expected=_q4,
    explain=_explain_q4,
    hint_text="set the latency term 2(N-1) alpha equal to the bandwidth term 2(N-1)/N x M / B and solve for M",
    unit="MB",
    noun="an amount of data",
    scale_hint={1e6: "looks like bytes; plain numbers are read in MB"},
)

q5 = ChoiceQuestion(
    name="q5",
    prompt="Going from 8 to 64 GPUs, does the data each GPU sends in a ring all-reduce grow several-fold? (yes/no)",
    options=("yes", "no"),
    expected=_q5,
    explain=_explain_q5,
    hint_text="compare 2(N-1)/N at N = 8 and N = 64",
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

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6)}
