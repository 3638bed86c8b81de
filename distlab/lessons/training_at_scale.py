"""Graded questions of lesson 11, training at scale: the schedules after 1F1B, and FSDP and HSDP layer by layer (lesson
11b, long_runs, asks about long context, failures and the batch). Every expected value is computed by distlab."""

from __future__ import annotations

from .. import collectives, models, pipeline, production
from ..units import format_bytes
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["QUESTIONS"]

#: Q1: the lesson's pipeline.
P, M = 8, 16
#: Q2: DualPipe's memory.
DUAL_P, DUAL_M = 8, 20
#: Q3: Llama-2-7B on 4 DGX H100 nodes, the lesson's example.
FSDP_MODEL, FSDP_NODES = "llama2-7b", 4
#: Q4: a model and cluster the lesson does not price (Llama-2-13B on 8 nodes), so that its numbers are the student's.
Q4_MODEL, Q4_NODES = "llama2-13b", 8


def _q1():
    return pipeline.schedule("1f1b", P, M).step_time - pipeline.schedule("zb-v", P, M).step_time


def _explain_q1():
    one, zbv = pipeline.schedule("1f1b", P, M), pipeline.schedule("zb-v", P, M)
    return (
        f"1F1B: {M} x 3 t_F of compute + (p-1)(F+B+W) = {P - 1} x 3 of bubble = {one.step_time:g} t_F; ZB-V: "
        f"{zbv.step_time:g} t_F (no idle inside any stage's span: {float(zbv.span_idle.max()):g}; only the warm-up "
        f"offset (p-1) x t_F/2 = {(P - 1) / 2:g}); saved {one.step_time - zbv.step_time:g} t_F"
    )


def _q2():
    return float(pipeline.schedule("dualpipe", DUAL_P, DUAL_M).peak_in_flight_w.max())


def _q2_choice():
    """The option the simulated peak supports: p + 1 (a), 2p (b), p (c), else (d)."""
    return {DUAL_P + 1: "a", 2 * DUAL_P: "b", DUAL_P: "c"}.get(int(_q2()), "d")


def _explain_q2():
    tl = pipeline.schedule("dualpipe", DUAL_P, DUAL_M)
    return (
        f"the simulated order holds at most {float(tl.peak_in_flight_w.max()):g} microbatches' activations of a "
        f"stage on every GPU: PP + 1 (DeepSeek-V3, Table 2), one more than 1F1B's first stage ({DUAL_P}), and twice "
        f"the parameters (two model copies)"
    )


def _plans(prefetch=1):
    return production.compare_sharding(FSDP_MODEL, "dgx-h100", nodes=FSDP_NODES, prefetch=prefetch)


def _layer_gather():
    """One real layer's bf16 all-gather over the 32 GPUs, as NCCL places it (collectives.placed_collective)."""
    layer = 2.0 * models.model(FSDP_MODEL).params_per_layer()
    return collectives.placed_collective("all-gather", layer, 8 * FSDP_NODES, "dgx-h100", nodes=FSDP_NODES)


def _q3():
    layers = models.model(FSDP_MODEL).layers
    return (3 * layers - 1) * _layer_gather().inter_sent_bytes / 1e9


def _explain_q3():
    layers, ag = models.model(FSDP_MODEL).layers, _layer_gather()
    return (
        f"{layers} forward all-gathers + {layers - 1} backward all-gathers (the last layer is kept) + {layers} "
        f"reduce-scatters of one layer's {format_bytes(ag.size_bytes)}; each runs {ag.algorithm}: 7/8 of the layer "
        f"over NVLink inside the node, then each GPU sends 3/4 of its 1/8 share to the other 3 nodes through its own "
        f"NIC ({format_bytes(ag.inter_sent_bytes)}): {3 * layers - 1} x {format_bytes(ag.inter_sent_bytes)} = "
        f"{_q3():.3g} GB (a flat ring through every GPU's NIC would send 31/32 of every layer: about 10x more)"
    )


def _q3_hints():
    layers = models.model(FSDP_MODEL).layers
    layer = 2.0 * models.model(FSDP_MODEL).params_per_layer()
    flat = (3 * layers - 1) * 31 / 32 * layer / 1e9
    return {
        # L gathers + L reduce-scatters instead of (2L - 1) + L
        2 * layers / (3 * layers - 1): "leaves out the backward all-gathers: with reshard_after_forward (FSDP2's "
        "default) each layer's parameters are freed after its forward and gathered again for its backward",
        flat / _q3(): "prices a flat ring through all 32 GPUs, every step through each GPU's own NIC: NCCL runs the "
        "ring inside each node over NVLink and sends only each GPU's 1/8 share between nodes, the node's 8 NICs "
        "together",
    }


def _q4_plans():
    return production.compare_sharding(Q4_MODEL, "dgx-h100", nodes=Q4_NODES, prefetch=0)


def _q4():
    full, hybrid = _q4_plans()
    if abs(hybrid.exposed_s - full.exposed_s) <= 1e-9 * full.exposed_s:
        return "same"
    return "hsdp" if hybrid.exposed_s < full.exposed_s else "fsdp"


def _explain_q4():
    full, hybrid = _q4_plans()
    n = full.layers
    return (
        f"without prefetch nothing overlaps: exposed = (2L - 1) gathers + L gradient reductions, L = {n}. FSDP's "
        f"gathers and reduce-scatters run hierarchically, NVLink then the network ({full.gather_s * 1e3:.2f} ms "
        f"and {full.reduce_s * 1e3:.2f} ms per layer); HSDP's gathers stay on NVLink ({hybrid.gather_s * 1e3:.2f} "
        f"ms) but its reduction adds an all-reduce of the 1/8 shard across the nodes ({hybrid.reduce_s * 1e3:.2f} "
        f"ms): {full.exposed_s * 1e3:.0f} ms (FSDP) against {hybrid.exposed_s * 1e3:.0f} ms (HSDP) per microbatch, "
        f"at {format_bytes(hybrid.state_bytes)} instead of {format_bytes(full.state_bytes)} of sharded state per GPU"
    )


q1 = NumericQuestion(
    name="q1",
    prompt=f"p = {P} stages, m = {M} microbatches, t_F = t_B = t_W = 1: how many t_F shorter is a ZB-V step than a "
    "1F1B step (one step from an empty pipeline)?",
    expected=_q1,
    explain=_explain_q1,
    unit="",
    noun="a number of t_F",
    rel_tol=1e-6,
    hint_text="Count the last stage's idle time in 1F1B (its warm-up and cool-down, each slot F + B + W). Then ask "
    "which part of it ZB-V's V-shaped placement and split backward still cannot fill: the last stage can only start "
    "once the first chunk's forward has crossed the stages before it, at half a t_F per chunk stage.",
    scale_hint={
        (P - 1) * 3 / _q1(): "is 1F1B's whole bubble: ZB-V still pays its warm-up offset once per step "
        "(the last stage starts (p-1) chunk forwards late)"
    },
)

q2 = ChoiceQuestion(
    name="q2",
    prompt=f"Moving from 1F1B to DualPipe on p = {DUAL_P} GPUs with m = {DUAL_M} microbatches, what does the "
    "busiest GPU hold? (a) activations of p + 1 microbatches instead of p, and twice the parameters; "
    "(b) activations of 2p microbatches, one full pipeline per direction, and the same parameters; "
    "(c) activations of p microbatches, as in 1F1B, and twice the parameters; "
    "(d) activations of about p/2 microbatches, since each direction fills half the pipeline",
    options=("a", "b", "c", "d"),
    expected=_q2_choice,
    explain=_explain_q2,
    hint_text="Picture each GPU as one stage of two pipelines running in opposite directions, each carrying half "
    "the microbatches. Add what the two directions keep in flight at once, and recall why DualPipe stores the "
    "model twice.",
    feedback={
        "b": "counts a full 1F1B pipeline per direction: each direction carries only half the microbatches and "
        "the two warm-ups interleave, so the GPU holds p + 1 in all (DeepSeek-V3, Table 2: PP + 1); and the two "
        "directions need two copies of the parameters",
        "c": "keeps 1F1B's peak: overlapping a forward chunk with a backward chunk keeps one more microbatch "
        "alive (DeepSeek-V3, Table 2: PP + 1)",
        "d": "halves per direction but forgets that the GPU is a stage of both directions at once: their "
        "microbatches add up to p + 1",
    },
)

q3 = NumericQuestion(
    name="q3",
    prompt=f"Llama-2-7B (32 layers of 202,383,360 parameters each, bf16), FSDP (fully_shard, reshard after forward) "
    f"over all 32 GPUs of {FSDP_NODES} DGX H100 nodes, with the collectives NCCL runs there (a ring over NVLink "
    "inside each node, then a ring between the nodes): how many GB does one GPU send over the network per "
    "microbatch (count only the layers' collectives)?",
    expected=_q3,
    explain=_explain_q3,
    unit="GB",
    noun="an amount of data",
    hint_text="List the collectives of one microbatch: an all-gather of each layer before its forward, an "
    "all-gather before its backward (is any layer's parameters still whole when the backward starts?), and a "
    "reduce-scatter of each layer's gradients. Inside a node the 8 GPUs first gather (or reduce) over NVLink; "
    "only each GPU's 1/8 share travels between the nodes, in a ring of 4 that sends (4 - 1)/4 of it.",
    scale_hint=_q3_hints(),
)

q4 = ChoiceQuestion(
    name="q4",
    prompt="Llama-2-13B (40 layers of 317,204,480 parameters each, bf16) on 8 DGX H100 nodes, 64 GPUs (NVLink "
    "450 GB/s per GPU inside a node, 50 GB/s per GPU between nodes), one sequence per microbatch, reshard after "
    "forward, with prefetch 0 (no collective issued ahead of time, so none overlaps the compute): which leaves less "
    "communication exposed per microbatch, FSDP over all 64 GPUs or HSDP (shard in a node, replicate across the "
    "8 nodes), or the same? (fsdp/hsdp/same)",
    options=("fsdp", "hsdp", "same"),
    expected=_q4,
    explain=_explain_q4,
    hint_text="Without prefetch each layer waits for its gathers (one before its forward, one before its "
    "backward, except the last layer's) and for its gradient reduction. Price one of each for both: FSDP's run "
    "over NVLink, then its 1/8 share in a ring of 8 nodes; HSDP's gather stays on NVLink, but its reduction adds "
    "an all-reduce of the 1/8 gradient shard across the 8 nodes. Then add them up.",
    feedback={
        "fsdp": "counts only the gradient reduction, where HSDP's all-reduce across the nodes costs more than FSDP's "
        "reduce-scatter; but there are 2L - 1 gathers against L reductions, and each FSDP gather crosses the "
        "network",
        "same": "holds with prefetch 1, where only the first gather and the last reduction show (and FSDP's "
        "network share of a gather and a reduce-scatter equals HSDP's all-reduce of the shard); without prefetch "
        "every gather shows, and FSDP's cross the network",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4)}
