"""Graded questions of lesson 8, where the step time goes in production (the network and overlap effects; the
failures are lesson 8b's, distlab.lessons.failure_triage). Every expected value is computed by distlab.production /
distlab.training; the prompts give the numbers a by-hand estimate needs, and the hints name no function."""

from __future__ import annotations

from .. import dataparallel, efficiency, hardware, memory, production
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["BUCKET_LINKS", "TAPER", "TAPER_VARIANTS", "CP_VARIANTS", "FP8_OPTIONS", "ZERO3_LAYOUT", "QUESTIONS"]

#: Q1: plain data parallelism of Llama-2-7B on 8 DGX H100 nodes, 8,192 tokens per GPU per step (the lesson sweeps 4,096).
BUCKET_MODEL, BUCKET_DP, BUCKET_TOKENS = "llama2-7b", 64, 8192
BUCKET_LINKS = dict(link="nvlink4", algorithm="hierarchical", gpus_per_node=8, inter_link="ib-ndr")
#: Q2, Q3: Llama-2-13B's gradients over 4 DGX H100 nodes on a 3:1 tapered NDR fabric (the lesson prices 7B's).
TAPER_MODEL = "llama2-13b"
TAPER = 3
#: per-student variants of Q2 and Q3 (the same choices, so "same cluster" is one draw); the flat ring is slower on
#: rails at every one of them (tests/lessons/test_lesson_production.py)
TAPER_VARIANTS = dict(taper=(2, 3, 4))
_SHARE = {2: "a half", 3: "a third", 4: "a quarter"}
#: Q5: context parallelism of Llama-3.1-8B (the lesson works Llama-3.1-70B, whose crossover it prints)
CP_MODEL, CP, CP_FABRIC = "llama3.1-8b", 16, "ib-ndr"
#: Q6: the ZeRO-3 layout of section 2 next to lesson 7's ZeRO-1 one, 3:1 taper without rails
ZERO1_LAYOUT = dict(tp=8, pp=4, zero=1, recompute="selective", sequence_parallel=True)
ZERO3_LAYOUT = dict(tp=8, pp=1, zero=3, recompute="full", sequence_parallel=True)
SCENARIO = dict(global_batch=256, seq_len=8192)
CP_VARIANTS = dict(cp=(4, 8, 16, 32, 64))
#: Q4's options: what FP8 training might halve
FP8_OPTIONS = ("tp-bytes", "model-state", "dp-bytes", "gemm-time")


def _sweep():
    grad = dataparallel.gradient_bytes(BUCKET_MODEL)
    backward = production.backward_time(BUCKET_MODEL, BUCKET_TOKENS)
    return production.bucket_sweep(grad, backward, BUCKET_DP, max_buckets=2000, **BUCKET_LINKS)


def _q1():
    return _sweep().best_buckets


def _explain_q1():
    s = _sweep()
    regime = (
        "B* >= sqrt(T / L), so B* is the optimum"
        if s.closed_form_applies
        else "B* < sqrt(T / L): the optimum is not B* but where T / B balances B L"
    )
    return (
        f"M = {format_bytes(s.grad_bytes)}, backward T = {format_seconds(s.backward_s)}, one bucket costs "
        f"L = {format_seconds(s.latency_s)} of latency and M s = {format_seconds(s.grad_bytes * s.seconds_per_byte)} "
        f"of bytes in all; the communication just fills backward at B* = (T - M s) / L = "
        f"{s.closed_form_buckets:.1f} ({regime}); the sweep's minimum: {s.best_buckets} buckets of "
        f"{format_bytes(s.best_bucket_bytes)}, {format_seconds(s.best_exposed_s)} exposed"
    )


def _taper(rails: bool, algorithm: str, taper=TAPER):
    cl = hardware.cluster("dgx-h100", 4, "ib-ndr", taper, rails)
    return production.dp_all_reduce(cl, dataparallel.gradient_bytes(TAPER_MODEL), algorithm=algorithm)


def _q2(taper=TAPER):
    return 1e3 * _taper(False, "hierarchical", taper).time_s


def _explain_q2(taper=TAPER):
    r = _taper(False, "hierarchical", taper)
    return (
        f"32 GPUs, 8 per node: intra-node ring over 8 on NVLink {format_seconds(r.intra_s)} + inter-node ring of "
        f"M/8 over 4 nodes at 50 GB/s / {taper} = {r.fabric_bw / 1e9:.2f} GB/s per GPU {format_seconds(r.inter_s)} "
        f"= {format_seconds(r.time_s)}"
    )


def _q3(taper=TAPER):
    return "yes" if _taper(True, "ring", taper).time_s < _taper(False, "ring", taper).time_s else "no"


def _explain_q3(taper=TAPER):
    r = _taper(True, "ring", taper)
    flat = _taper(False, "ring", taper)
    h = _taper(True, "hierarchical", taper)
    return (
        f"the flat ring runs 0 -> 1 -> ... -> 31: each node-crossing hop joins local rank 7 to local rank 0, "
        f"different rails, so it crosses the spine. Without rails only {flat.flows_per_node} transfer leaves each "
        f"node, within the 8/{taper} ports' worth of uplink a node has: full port rate, "
        f"{format_seconds(flat.time_s)}. On rails every node's crossing transfer leaves rank 7's leaf, so that "
        f"leaf's uplinks carry one transfer per port (assuming that leaf serves only this job's 4 nodes, all sending at "
        f"once): the full 1/{taper} taper, {format_seconds(r.time_s)}. "
        f"The hierarchical all-reduce's inter-node ring joins equal local ranks and drops to "
        f"{format_seconds(h.time_s)} on rails"
    )


def _q1_numbers():
    s = _sweep()
    return s.backward_s, s.latency_s, s.grad_bytes * s.seconds_per_byte


def _q1_hints():
    s = _sweep()
    best = s.best_buckets
    t, lat, ms = _q1_numbers()
    return {
        (t / lat) ** 0.5 / best: "is sqrt(T / L), the optimum of the other regime (when the bytes alone outlast "
        "backward); here T - M s is positive and large: which regime is this?",
        t / lat / best: "leaves out the bytes: the buckets' M s of transfer also has to fit under backward",
    }


def _q2_numbers(taper=TAPER):
    r = _taper(False, "hierarchical", 1)
    return r.intra_s, r.inter_s


def _q2_hints_by_hand(taper):
    intra, inter = _q2_numbers()
    want = _q2(taper) / 1e3
    return {
        (intra + inter) / want: "is the non-blocking time: the taper slows the traffic that crosses the spine",
        taper * (intra + inter) / want: "slows the NVLink phase too; only the inter-node phase crosses the spine",
    }


def _fp8_ratios() -> dict:
    """fp8 / bf16 for each quantity of q4's options (distlab's recipes and the H100's peaks)."""
    fp8, bf16 = memory.precision_recipe("fp8"), memory.precision_recipe("mixed")
    gpu = hardware.accelerator("h100-sxm")
    # message_bytes and compute_precision are filled in by the recipe (never None once built)
    return {
        "tp-bytes": float(fp8.message_bytes or 0) / float(bf16.message_bytes or 1),
        "model-state": fp8.bytes_per_param / bf16.bytes_per_param,
        "dp-bytes": fp8.gradient_bytes / bf16.gradient_bytes,
        "gemm-time": gpu.peak(bf16.compute_precision or "bf16") / gpu.peak(fp8.compute_precision or "fp8"),
    }


def _q4():
    halves = [o for o, r in _fp8_ratios().items() if abs(r - 0.5) < 0.01]  # the fp8 peak: 1,979 vs 989.4 TFLOP/s
    return halves[0] if len(halves) == 1 else "none"


def _explain_q4():
    r = _fp8_ratios()
    fp8 = memory.precision_recipe("fp8")
    return (
        f"fp8 / bf16: TP and pipeline messages x{r['tp-bytes']:g} (matmul outputs and gradients stay bf16); model "
        f"states {fp8.bytes_per_param:g} / 16 B = x{r['model-state']:.3g} (fp8 weights {fp8.weight_bytes:g} B, "
        f"bf16 gradients {fp8.gradient_bytes:g} B, fp32 master weights and Adam {fp8.optimizer_bytes:g} B); "
        f"the DP gradient all-reduce x{r['dp-bytes']:g} (bf16 gradients); matmul time x{r['gemm-time']:.3g} at the "
        f"dense peaks, an upper bound: at the rates GEMMs reach (Bekman's MAMF) it is x{_achieved_gemm_ratio():.2f}, "
        "and attention, the element-wise work and the casts stay 16-bit"
    )


def _achieved_gemm_ratio() -> float:
    """fp8 / bf16 weight-GEMM time on an H100 at the rates the step model prices them with: the bf16 and FP8
    peaks times the calibrated compute model's matmul shares (efficiency.compute_model). Lesson 8 §3."""
    gpu = hardware.accelerator("h100-sxm")
    cm = efficiency.compute_model(gpu, "flash")
    fp8_share = cm.fp8_matmul_efficiency or cm.matmul_efficiency
    return (gpu.peak("bf16") * cm.matmul_efficiency) / (gpu.peak("fp8") * fp8_share)


def _ring(cp=CP):
    return production.ring_attention_step(CP_MODEL, 8192 * cp, cp, link=CP_FABRIC)


def _q5(cp=CP):
    return _ring(cp).crossover_seq_len


def _explain_q5(cp=CP):
    r = _ring(cp)
    return (
        f"per step the K/V block of a chunk c costs alpha + 2 c x {r.kv_width:g} x 2 B / 50 GB/s; causal attention "
        f"on it 1/2 x 4 c^2 h / (peak x eta), eta flash attention's measured {100 * efficiency.flash_attention_rate('h100-sxm'):.1f}% of peak on the H100; without alpha they are equal at c* = w_kv e peak eta / (beta h) = "
        f"{_ring_by_hand(cp) / cp:,.0f} tokens per GPU, S = {cp} c* = {_ring_by_hand(cp):,.0f}; with the latency "
        f"the kit finds c* ~ {r.crossover_seq_len // cp:,} tokens per GPU, i.e. S = {cp} x c* = {r.crossover_seq_len:,}"
    )


def _ring_by_hand(cp=CP):
    """The crossover S = cp c* without the latency: 2 c w_kv e / beta = 2 c^2 h / (peak eta)."""
    from .. import models

    r = _ring(cp)
    peak = hardware.accelerator("h100-sxm").peak("bf16")
    eta = efficiency.flash_attention_rate("h100-sxm")  # the rate ring_attention_step prices attention at
    return cp * r.kv_width * r.element_bytes * peak * eta / (50e9 * models.model(CP_MODEL).hidden)


def _hidden_over_kv():
    from .. import models

    return models.model(CP_MODEL).hidden / _ring().kv_width


def _q5_hints(cp):
    want, hand = _q5(cp), _ring_by_hand(cp)
    full_width = hand * _hidden_over_kv()
    return {
        hand / 2 / want: "drops a factor of two: per ring step a chunk sends K and V, and causal attention with "
        "load-balanced chunks does half the square's work",
        full_width / want: "sends the full hidden width; with grouped-query attention K and V are only the 8 K/V heads "
        "wide (1,024)",
        hand / cp / want: "is the chunk per GPU, c*; the question asks for the whole sequence, cp x c*",
    }


def _network(layout, taper, rails=False):
    return production.network_step(
        "llama3.1-70b", nodes=32, oversubscription=taper, rail_optimized=rails, **layout, **SCENARIO
    )


def _mfu_loss(layout, taper=TAPER):
    return 1 - _network(layout, taper).mfu / _network(layout, 1).mfu


#: Q6: the ZeRO-3 layout on a 2:1 taper (the lesson's table prices 1:1 and 3:1), and the ranges it offers (%)
Q6_TAPER = 2
Q6_RANGES = {"under-10": (0, 10), "10-25": (10, 25), "25-50": (25, 50), "over-50": (50, 100)}


def _q6():
    loss = 100 * _mfu_loss(ZERO3_LAYOUT, Q6_TAPER)
    return next(name for name, (low, high) in Q6_RANGES.items() if low <= loss < high)


def _explain_q6():
    z3, z3_flat = _network(ZERO3_LAYOUT, Q6_TAPER), _network(ZERO3_LAYOUT, 1)
    m = z3.microbatches
    return (
        f"the taper slows only the inter-node phase, so from the lesson's 1:1 and 3:1 rows the DP traffic at "
        f"{Q6_TAPER}:1 is {format_seconds(z3.dp_comm_s)} per step, {format_seconds(z3.dp_comm_s / m)} per "
        f"microbatch against {format_seconds(z3.compute_s / m)} of compute to hide under: about "
        f"{format_seconds(z3.dp_exposed_s)} exposed per step, a step of {format_seconds(z3.step_time_s)} against "
        f"{format_seconds(z3_flat.step_time_s)} on the non-blocking fabric: {100 * _mfu_loss(ZERO3_LAYOUT, Q6_TAPER):.1f}% "
        f"of the MFU lost ({100 * _mfu_loss(ZERO3_LAYOUT):.0f}% at {TAPER}:1). Lesson 7's ZeRO-1 layout loses "
        f"{100 * _mfu_loss(ZERO1_LAYOUT, Q6_TAPER):.1f}% at {Q6_TAPER}:1: it communicates once per step"
    )


q1 = NumericQuestion(
    name="q1",
    prompt=f"Llama-2-7B, plain data parallelism over {BUCKET_DP} GPUs (8 DGX H100, hierarchical all-reduce on NDR), "
    f"{BUCKET_TOKENS:,} tokens per GPU per step. Backward takes T = {1e3 * _q1_numbers()[0]:.2f} ms; one bucket's "
    f"all-reduce costs L = {1e6 * _q1_numbers()[1]:.1f} us of latency, and all the gradients' bytes M s = "
    f"{1e3 * _q1_numbers()[2]:.2f} ms. Estimate by hand: which bucket count leaves the least exposed communication?",
    # rel_tol=0.005 (3 buckets either side of 662): the exposed time is flat within a few buckets of the optimum (a
    # fraction of a percent), and the prompt's rounded T, L and M s move B* by about one bucket
    expected=_q1,
    explain=_explain_q1,
    unit="",
    noun="a number of buckets",
    rel_tol=0.005,
    hint_text="the buckets' communication runs on one stream while backward goes on: which count makes all of it "
    "(B latencies and the bytes) just fill backward, and is that the optimum in this regime?",
    scale_hint=_q1_hints(),
)

q2 = NumericQuestion(
    name="q2",
    params=dict(taper=TAPER),
    variants=TAPER_VARIANTS,
    prompt="Llama-2-13B's gradients (bf16), hierarchical all-reduce over the 32 GPUs of 4 DGX H100 nodes. On a "
    f"non-blocking NDR fabric the NVLink phase takes {1e3 * _q2_numbers()[0]:.2f} ms and the inter-node ring "
    f"{1e3 * _q2_numbers()[1]:.2f} ms. Estimate by hand: on a {{taper}}:1 oversubscribed fabric without rails, how "
    "long does the all-reduce take, in ms?",
    expected=_q2,
    explain=_explain_q2,
    unit="ms",
    noun="a time",
    hint_text="which phase crosses the spine, and how many transfers leave each node at once against its uplinks?",
    scale_hint=_q2_hints_by_hand,
)

q3 = ChoiceQuestion(
    name="q3",
    params=dict(taper=TAPER),
    variants=TAPER_VARIANTS,
    prompt="Same cluster: does making the fabric rail-optimized speed up ONE FLAT RING through the 32 GPUs in rank "
    "order? (yes/no)",
    options=("yes", "no"),
    expected=_q3,
    explain=_explain_q3,
    hint_text="which local ranks does a ring hop from node 0 to node 1 join?",
    feedback={
        "yes": "assumes rails speed up any ring; a rail joins EQUAL local ranks, and this ring's node-crossing hops "
        "join local rank 7 to local rank 0",
    },
)

q4 = ChoiceQuestion(
    name="q4",
    prompt="Moving a bf16 run to FP8 (Transformer Engine style, distlab's fp8 recipe), which of these halves? "
    "tp-bytes: the tensor-parallel collectives' bytes; model-state: the model-state bytes per parameter; dp-bytes: "
    "the data-parallel gradient all-reduce; gemm-time: the matmuls' compute time (at the dense peak).",
    options=FP8_OPTIONS,
    expected=_q4,
    explain=_explain_q4,
    hint_text="FP8 is the INPUT format of the matmuls: follow each tensor (inputs, outputs, gradients, master "
    "weights, Adam moments) and ask which of them is really one byte",
    feedback={
        "tp-bytes": "assumes every tensor halves; the matmuls' outputs are bf16, so the row-parallel reductions and the "
        "backward TP collectives carry 2-byte data",
        "model-state": "halves only the weights: gradients stay bf16 and the master weights and Adam moments fp32, "
        "16 to 15 bytes per parameter",
        "dp-bytes": "the gradients stay bf16: the data-parallel all-reduce moves the same bytes (only a ZeRO "
        "all-gather of FP8 primary weights shrinks)",
    },
)

q5 = NumericQuestion(
    name="q5",
    params=dict(cp=CP),
    variants=CP_VARIANTS,
    prompt="Llama-3.1-8B (h = 4,096; 8 K/V heads of 128, so w_kv = 1,024), context parallelism cp = {cp} across "
    "nodes (InfiniBand NDR, 50 GB/s per GPU), causal ring attention with load-balanced chunks, bf16, attention at "
    "335 TFLOP/s (FlashAttention-2's measured rate on the H100, a third of its 989.4 TFLOP/s peak). Estimate by hand, ignoring the latency: the shortest sequence (tokens) at "
    "which each ring step's K/V transfer hides under its attention compute?",
    expected=_q5,
    explain=_explain_q5,
    unit="",
    noun="a number of tokens",
    # the latency the estimate leaves out moves the crossover by about 3.4 % (the kit keeps it): c* = 3,350 tokens
    # without it, 3,464 with alpha = 9.6 us (tests/lessons/test_lesson_production.py)
    rel_tol=0.08,
    hint_text="per ring step, write the bytes a GPU sends (K and V of its chunk c) over the bandwidth and the "
    "attention FLOPs of its query chunk against that chunk over the compute rate; one grows as c, the other as c^2",
    scale_hint=_q5_hints,
)

q6 = ChoiceQuestion(
    name="q6",
    prompt=f"Section 2's tp 8 ZeRO-3 layout with full recomputation (Llama-3.1-70B on 32 DGX H100 nodes) on a "
    f"{Q6_TAPER}:1 oversubscribed fabric without rails: how much of its MFU does it lose against the non-blocking "
    "fabric? under-10: less than 10 %; 10-25; 25-50; over-50: more than half.",
    options=tuple(Q6_RANGES),
    expected=_q6,
    explain=_explain_q6,
    hint_text="the taper slows only the inter-node phase: split the table's 1:1 and 3:1 DP traffic into a part that "
    "stays and a part that scales, then compare each microbatch's traffic with the compute it can hide under",
    feedback={
        "over-50": "is the 3:1 row's loss: at 2:1 the inter-node phase takes 2/3 as long, so each microbatch's "
        "traffic outlasts its compute by about half as much",
        "under-10": "would hold if the traffic still hid under the compute; per microbatch it is about twice as "
        "long as the compute it overlaps",
        "10-25": "counts too little of the traffic as exposed: all of it beyond each microbatch's compute waits, "
        "in every microbatch",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6)}
