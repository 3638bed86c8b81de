"""Graded questions of lesson 10, mixture of experts and expert parallelism. Every expected value is computed by
distlab.moe (and distlab.hardware for the peak), never typed in; each question asks for a decision or a diagnosis
that needs the lesson's reasoning, and typical mistakes get their own feedback."""

from __future__ import annotations

from .. import hardware, moe
from ..units import format_bytes
from .questions import NumericQuestion

__all__ = ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "QUESTIONS"]

_PERCENT_HINT = {0.01: "looks like a fraction; give it in percent (34.3 means 34.3 %)"}

# q1: DeepSeek-V3's run (report Sec. 3.2): 2048 GPUs, PP 16, ZeRO-1; how small can EP be?
Q1 = dict(model="deepseek-v3", gpus=2048, pp=16, budget_gb=40)
# q2: a profile's per-expert token counts, 2 experts per GPU
Q2 = dict(loads=(1900, 500, 700, 900, 1200, 800, 600, 1400), ep=4, balanced_ms=10.0)
# q3: Mixtral-8x7B on DGX H100 nodes with expert tensor parallelism
Q3 = dict(model="mixtral-8x7b", etp=2, gpus_per_node=8)
# q4: DeepSeek-V3, one 8,192-token microbatch per GPU (two sequences of 4,096; the lesson works one), EP 64 over
# 8 nodes, bf16, no node limit
Q4 = dict(model="deepseek-v3", tokens=8192, ep=64, per_node=8)
# q5: Mixtral-like layer with a capacity factor
Q5 = dict(tokens=4096, experts=8, top_k=2, capacity_factor=1.25)
# q6: DeepSeek-V3's pre-training: 14.8T tokens in 2.664M H800 GPU-hours (report Table 1, Sec. 1)
Q6 = dict(model="deepseek-v3", tokens=14.8e12, gpu_hours=2.664e6)

_EP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _memory_gb(model, gpus, pp, ep):
    return moe.expert_parallel_memory(model, gpus, pp=pp, ep=ep, zero=1).total_bytes / 1e9


def _q1(model, gpus, pp, budget_gb):
    return next(ep for ep in _EP_CANDIDATES if _memory_gb(model, gpus, pp, ep) <= budget_gb)


def _explain_q1(model, gpus, pp, budget_gb):
    ep = _q1(model, gpus, pp, budget_gb)
    rows = ", ".join(f"ep {e}: {_memory_gb(model, gpus, pp, e):.1f} GB" for e in _EP_CANDIDATES if e <= 2 * ep)
    mem = moe.expert_parallel_memory(model, gpus, pp=pp, ep=ep, zero=1)
    return (
        f"Model states per GPU (moe.expert_parallel_memory, ZeRO-1): {rows}. The non-expert part "
        f"({mem.dense_bytes / 1e9:.1f} GB) does not depend on ep; the experts' weights and gradients shrink as "
        f"1/(ep x pp), while their optimizer states, also sharded over edp = gpus/(ep x pp), stay 12 B x "
        f"experts / gpus whatever ep. The smallest ep within {budget_gb} GB is {ep}."
    )


def _q1_hints(model, gpus, pp, budget_gb):
    ep = _q1(model, gpus, pp, budget_gb)
    return {
        0.5: f"ep = {ep // 2} needs {_memory_gb(model, gpus, pp, ep // 2):.1f} GB per GPU, over the {budget_gb} GB "
        f"budget (the rest of the GPU is for activations)",
        2.0: f"fits, but ep = {ep} fits too: the question asks for the smallest",
    }


def _imbalance(loads, ep):
    return moe.imbalance_factor(list(loads), ep)


def _q2(loads, ep, balanced_ms):
    return balanced_ms * _imbalance(loads, ep)


def _explain_q2(loads, ep, balanced_ms):
    per = len(loads) // ep
    gpu = [sum(loads[g * per : (g + 1) * per]) for g in range(ep)]
    mean = sum(gpu) / ep
    return (
        f"GPU g holds experts {per}g..{per}g+{per - 1}: token copies per GPU {gpu}, mean {mean:g}; the busiest "
        f"has {max(gpu)} = x{max(gpu) / mean:.3g} the mean (moe.imbalance_factor), and every GPU waits for it at "
        f"the combine all-to-all: {balanced_ms:g} ms x {max(gpu) / mean:.3g} = {_q2(loads, ep, balanced_ms):.3g} ms"
    )


def _q2_hints(loads, ep, balanced_ms):
    expert = max(loads) / (sum(loads) / len(loads))
    factor = _imbalance(loads, ep)
    return {
        expert / factor: "uses the busiest EXPERT's share; a GPU runs all of its experts, so add them per GPU first",
        1 / factor**2: "divides by the imbalance; the busiest GPU is slower than the balanced share, not faster",
    }


def _q3(model, etp, gpus_per_node):
    m = moe.model(model)
    inside = [
        ep
        for ep in _EP_CANDIDATES
        if m.experts % ep == 0 and moe.ep_members_per_node(etp=etp, ep=ep, gpus_per_node=gpus_per_node) == ep
    ]
    return max(inside)


def _explain_q3(model, etp, gpus_per_node):
    ep = _q3(model, etp, gpus_per_node)
    e = moe.model(model).experts
    return (
        f"In Megatron's expert layout (mesh.expert_layout) the expert-TP ranks vary fastest: EP neighbours are "
        f"etp = {etp} ranks apart, so an EP group of size ep covers etp x ep consecutive ranks. Inside one node of "
        f"{gpus_per_node}: etp x ep <= {gpus_per_node}, and ep must divide the {e} experts: ep = {ep}."
    )


def _q3_hints(model, etp, gpus_per_node):
    return {
        float(etp): f"puts {gpus_per_node * etp} ranks in one EP group with its expert-TP partners: "
        f"{etp} nodes; the expert-TP ranks sit between EP neighbours"
    }


def _q4_bytes(model, tokens, ep, per_node):
    m = moe.model(model)
    return moe.all_to_all_bytes(tokens, m.hidden, m.top_k, ep, ep_per_node=per_node, experts=m.experts)


def _q4(model, tokens, ep, per_node):
    return moe.ALL_TO_ALLS_PER_LAYER["none"] * _q4_bytes(model, tokens, ep, per_node)["inter"] / 1e9


def _explain_q4(model, tokens, ep, per_node):
    m = moe.model(model)
    one = _q4_bytes(model, tokens, ep, per_node)
    return (
        f"One all-to-all: T k h x 2 B = {tokens} x {m.top_k} x {m.hidden} x 2 = "
        f"{format_bytes(one['send_buffer'])} per GPU, of which (ep - p)/ep = {ep - per_node}/{ep} goes to other "
        f"nodes: {format_bytes(one['inter'])} (moe.all_to_all_bytes). A layer runs 4 (dispatch and combine, "
        f"forward and backward): {_q4(model, tokens, ep, per_node):.3g} GB"
    )


def _q4_hints(model, tokens, ep, per_node):
    m = moe.model(model)
    return {
        0.25: "is one all-to-all; a layer dispatches and combines in the forward, and again in the backward",
        0.5: "counts the forward only; the backward sends the gradients back the same way",
        1 / m.top_k: f"sends each token once; it goes to its top-{m.top_k} experts, one copy each",
        (ep - 1) / (ep - per_node): f"counts all {ep - 1} other GPUs; {per_node - 1} of them share the node (NVLink)",
        1e9: "looks like bytes, but plain numbers are read in GB",
    }


def _q5(tokens, experts, top_k, capacity_factor):
    return moe.expert_capacity(tokens, experts, top_k, capacity_factor)


def _explain_q5(tokens, experts, top_k, capacity_factor):
    return (
        f"capacity = ceil(capacity_factor x T x k / E) = ceil({capacity_factor:g} x {tokens} x {top_k} / "
        f"{experts}) = {_q5(tokens, experts, top_k, capacity_factor)} (GShard Sec. 2.2, Switch Sec. 2.2; "
        f"moe.expert_capacity): the average share of the T k copies, plus the slack"
    )


def _q5_hints(tokens, experts, top_k, capacity_factor):
    return {
        1 / top_k: f"counts tokens, not copies: each token is sent to {top_k} experts",
        1 / capacity_factor: "is the average load; the capacity factor adds the slack above it",
        float(experts): "is the whole batch's copies; divide them among the experts",
    }


def _flops(model, tokens):
    return 6.0 * moe.model(model).active_parameter_count(embedding=False) * tokens


def _q6(model, tokens, gpu_hours):
    peak = hardware.accelerator("h100-sxm").peak("bf16")
    return 100.0 * _flops(model, tokens) / (gpu_hours * 3600.0 * peak)


def _explain_q6(model, tokens, gpu_hours):
    m = moe.model(model)
    peak = hardware.accelerator("h100-sxm").peak("bf16")
    return (
        f"6 x active x tokens = 6 x {m.active_parameter_count(embedding=False) / 1e9:.2f}e9 x {tokens:.3g} = "
        f"{_flops(model, tokens):.3g} FLOPs; available {gpu_hours:.4g} h x 3600 s x {peak / 1e12:.1f} TFLOP/s = "
        f"{gpu_hours * 3600 * peak:.3g}; ratio {_q6(model, tokens, gpu_hours):.1f} %. 6N leaves attention out: at a "
        f"4K context distlab.flops counts {_attention_factor(model):.2f} x 6N per token (the lesson's §1), about "
        f"{_q6(model, tokens, gpu_hours) * (_attention_factor(model) - 1):.0f} points more. And DeepSeek-V3 trained "
        f"its GEMMs mostly in FP8 (report Sec. 3.3), so a utilisation against the bf16 peak is a convention"
    )


def _attention_factor(model, seq_len=4096):
    """Training FLOPs per token with the attention core (moe.moe_step_flops) over 6 x the active parameters."""
    f = moe.moe_step_flops(moe.model(model), global_batch=1, seq_len=seq_len)
    return f.model_flops / f.tokens / (6.0 * moe.model(model).active_parameter_count(embedding=False))


def _q6_hints(model, tokens, gpu_hours):
    m = moe.model(model)
    return {
        **_PERCENT_HINT,
        m.parameter_count()
        / m.active_parameter_count(
            embedding=False
        ): f"counts all {m.parameter_count() / 1e9:.0f}B parameters; a token runs only its active ones",
        1 / 3: "counts the forward pass only (2N); training is 6N per token",
    }


q1 = NumericQuestion(
    name="q1",
    params=Q1,
    variants=dict(budget_gb=(30, 40, 60)),
    prompt="DeepSeek-V3 on {gpus} GPUs with PP = {pp}, TP = 1, Megatron's distributed optimizer (ZeRO-1) and mixed "
    "precision (16 B per parameter before sharding). Model states may use at most {budget_gb} GB per GPU. "
    "What is the SMALLEST expert-parallel size (a power of two dividing the 256 experts) that fits?",
    expected=_q1,
    explain=_explain_q1,
    hint_text="the non-expert weights do not shrink with ep; the routed experts (97 % of the parameters) are "
    "split over ep x pp; try ep = 1, 2, 4, ... and keep the smallest whose states fit the budget",
    unit="",
    rel_tol=0.0,
    noun="an expert-parallel size",
    scale_hint=_q1_hints,
)

q2 = NumericQuestion(
    name="q2",
    params=Q2,
    prompt="A profile of one MoE layer on an EP group of {ep} GPUs (2 experts each, GPU 0 holds experts 0 and 1, "
    "...) counts these token copies per expert: {loads}. With balanced routing the layer's expert GEMMs would "
    "take {balanced_ms:g} ms. How long (ms) do they take?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="the layer ends with an all-to-all that waits for every GPU: which GPU has the most work?",
    unit="ms",
    noun="a time",
    scale_hint=_q2_hints,
)

q3 = NumericQuestion(
    name="q3",
    params=Q3,
    variants=dict(etp=(2, 4)),
    prompt="Mixtral-8x7B's experts with expert tensor parallelism etp = {etp}, in Megatron's rank order, on nodes of "
    "{gpus_per_node} GPUs. What is the LARGEST expert-parallel size whose all-to-all stays inside one node?",
    expected=_q3,
    explain=_explain_q3,
    hint_text="in the expert layout the order is tp-ep-dp-pp with tp = etp: how far apart are EP neighbours?",
    unit="",
    rel_tol=0.0,
    noun="an expert-parallel size",
    scale_hint=_q3_hints,
)

q4 = NumericQuestion(
    name="q4",
    params=Q4,
    prompt="DeepSeek-V3 (h = 7168, top-8), one microbatch of {tokens} tokens per GPU, EP = {ep} over nodes of "
    "{per_node}, bf16, uniform routing, no node limit. How many GB does one GPU send to OTHER NODES for one MoE "
    "layer, forward and backward?",
    expected=_q4,
    explain=_explain_q4,
    hint_text="one all-to-all sends T x k x h x 2 bytes, spread evenly over the EP group; which share leaves the "
    "node, and how many all-to-alls does a layer run in training?",
    unit="GB",
    noun="an amount of data",
    scale_hint=_q4_hints,
)

q5 = NumericQuestion(
    name="q5",
    params=Q5,
    variants=dict(capacity_factor=(1.25, 1.5)),
    prompt="An MoE layer routes {tokens} tokens per GPU to the top-{top_k} of {experts} experts with capacity factor "
    "{capacity_factor:g}. How many token copies can one expert accept from one GPU before it drops the rest?",
    expected=_q5,
    explain=_explain_q5,
    hint_text="capacity = capacity factor x (token copies / experts), rounded up",
    unit="",
    rel_tol=0.0,
    noun="a number of token copies",
    scale_hint=_q5_hints,
)

q6 = NumericQuestion(
    name="q6",
    params=Q6,
    prompt="DeepSeek-V3 was pre-trained on {tokens:.3g} tokens in {gpu_hours:.4g} H800 GPU-hours (report, Table 1). "
    "Counting 6 x the active parameters per token (without the input embedding) and the H800's dense bf16 peak "
    "(that of the H100 SXM), what model FLOPs utilisation (%) does that imply?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="MFU = model FLOPs / (GPU-seconds x peak); an MoE token pays for its active parameters only",
    unit="%",
    noun="a percentage",
    scale_hint=_q6_hints,
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6)}
