"""Graded questions of lesson 5, tensor and sequence parallelism. Every expected value is computed by
distlab.tensor (which prices collectives with distlab.collectives and activations with distlab.memory)."""

from __future__ import annotations

from .. import hardware, models, tensor
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["RING", "Q1_VARIANTS", "LAYER_VARIANTS", "SP_VARIANTS", "RING_VARIANTS", "QUESTIONS"]

# The setups the questions use (named once, so prompts and answers agree).
Q1_MODEL, Q1_TP = "llama2-7b", 8  # d_model 4096, 32 heads of 128 (the MIT 6.5940 quiz asks t = 4; the lesson works it)
LAYER_MODEL, LAYER_TP, LAYER_SEQ = "llama2-7b", 8, 4096  # one microbatch of one 4,096-token sequence
#: q2 and q3 ask about a sequence twice as long as the one the lesson works (LAYER_SEQ)
QUESTION_SEQ = 8192
SP_MODEL, SP_TP, SP_SEQ = "gpt3-175b", 8, 2048
RING = dict(seq_len=131072, cp=64, hidden=8192, precision="fp8")  # the bandwidth modeler's example
#: q5 asks about a sequence twice as long as the example the lesson works
Q5_RING = dict(RING, seq_len=262144)
#: per-student variants (distlab.lessons.variants): every tp divides the 32 heads of llama2-7b and the 96 of
#: gpt3-175b; q2 and q3 ("the same layer") declare the same choices, so they draw the same numbers
Q1_VARIANTS = dict(tp=(2, 4, 8, 16))
LAYER_VARIANTS = dict(tp=(4, 8, 16), seq=(2048, 4096, 8192))  # not 2: there 2(N-1)/N x M is M
SP_VARIANTS = dict(tp=(2, 4, 8), seq=(1024, 2048, 4096))
RING_VARIANTS = dict(seq_len=(65536, 131072, 262144), cp=(16, 32, 64, 128), hidden=(4096, 8192))

_MB_HINT = {1e6: "looks like bytes, but plain numbers are read in MB (write '235e6 B' or 235)"}


def _qkv_per_gpu(tp=Q1_TP) -> int:
    shards = tensor.layer_shards(Q1_MODEL, tp)
    return sum(shards.shard(name).params_per_gpu for name in ("query", "key", "value"))


def _explain_q1(tp=Q1_TP) -> str:
    m = models.model(Q1_MODEL)
    q = tensor.layer_shards(Q1_MODEL, tp).shard("query")
    return (
        f"Q, K and V are each {m.hidden} x {m.hidden}, split by columns (by heads: {m.heads // tp} of the "
        f"{m.heads} heads per GPU), so each GPU keeps three {q.shard_shape[0]} x {q.shard_shape[1]} blocks: "
        f"3 x {q.params_per_gpu:,} = {_qkv_per_gpu(tp):,} parameters"
    )


def _layer(link="nvlink4", tp=LAYER_TP, seq=LAYER_SEQ, **kwargs):
    return tensor.tp_layer_cost(LAYER_MODEL, tp, seq_len=seq, micro_batch_size=1, link=link, **kwargs)


def _q2(tp=LAYER_TP, seq=LAYER_SEQ) -> float:
    return _layer(tp=tp, seq=seq).comm_bytes_per_gpu / 1e6


def _explain_q2(tp=LAYER_TP, seq=LAYER_SEQ) -> str:
    c = _layer(tp=tp, seq=seq)
    n = c.tp
    return (
        f"M = b x s x h x 2 B = 1 x {c.seq_len} x {c.hidden} x 2 = {format_bytes(c.message_bytes)}; a ring all-reduce "
        f"over {n} GPUs sends 2({n}-1)/{n} x M = {format_bytes(c.collectives[0][1].bytes_sent_per_gpu)} per GPU; "
        f"training runs 4 of them per layer (2 forward, 2 backward): {format_bytes(c.comm_bytes_per_gpu)}"
    )


def _q3(tp=LAYER_TP, seq=LAYER_SEQ) -> float:
    return _layer("ib-ndr", tp, seq).comm_time_s * 1e3


def _explain_q3(tp=LAYER_TP, seq=LAYER_SEQ) -> str:
    c = _layer("ib-ndr", tp, seq)
    one = c.collectives[0][1]
    link = hardware.link("ib-ndr")
    return (
        f"One ring all-reduce: 2({c.tp}-1) x {format_seconds(link.latency)} latency + "
        f"{format_bytes(one.bytes_sent_per_gpu)} / {format_bytes(link.bandwidth)}/s = "
        f"{format_seconds(one.latency_time_s)} + {format_seconds(one.bandwidth_time_s)} = {format_seconds(one.time_s)}; "
        f"x 4 = {format_seconds(c.comm_time_s)}, against {format_seconds(c.compute_time_s)} of compute "
        f"(on nvlink4: {format_seconds(_layer(tp=tp, seq=seq).comm_time_s)})"
    )


def _sp(tp=SP_TP, seq=SP_SEQ):
    return tensor.sequence_parallel_saving(SP_MODEL, tp, micro_batch_size=1, seq_len=seq, recompute="selective")


def _duplicate(tp, seq):
    """Bytes per layer per GPU that TP alone leaves identical on all tp GPUs (the norms and dropouts, the 10 s b h of
    Korthikanti Table 2): what sequence parallelism divides by t, so saved x t / (t - 1)."""
    return _sp(tp, seq).saved_bytes * tp / (tp - 1)


def _sent(tp, seq, **kwargs) -> float:
    return tensor.tp_layer_cost(
        SP_MODEL, tp, seq_len=seq, micro_batch_size=1, link="nvlink4", **kwargs
    ).comm_bytes_per_gpu


def _q4_fixes(tp, seq):
    """What each of q4's fixes leaves of the duplicate and what TP then sends, per layer per GPU (bytes)."""
    dup = _duplicate(tp, seq)
    full = tensor.sequence_parallel_saving(SP_MODEL, tp, micro_batch_size=1, seq_len=seq, recompute="full")
    return {
        "a": (dup / tp, _sent(tp, seq, sequence_parallel=True)),  # split over t; the pairs and the 2 re-gathers
        "b": (_duplicate(2 * tp, seq), _sent(2 * tp, seq)),  # the norms and dropouts stay whole on every GPU
        "c": (full.without_bytes, _sent(tp, seq, recompute="full")),  # keeps the layer input; 6 all-reduces
        "d": (dup, _sent(tp, seq)),  # ZeRO-3 shards model states, not activations
    }, (dup, _sent(tp, seq))


def _q4(tp=SP_TP, seq=SP_SEQ) -> str:
    """Of the fixes that cut the duplicate, the one that sends the fewest TP bytes."""
    fixes, (dup, _) = _q4_fixes(tp, seq)
    cutting = {k: sent for k, (left, sent) in fixes.items() if left < dup * (1 - 1e-9)}
    return min(cutting, key=cutting.__getitem__)


def _q4_numbers(tp=SP_TP, seq=SP_SEQ) -> dict:
    return dict(total=_sp(tp, seq).without_bytes / 1e6, replicated=_duplicate(tp, seq) / 1e6)


def _explain_q4(tp=SP_TP, seq=SP_SEQ) -> str:
    sp = _sp(tp, seq)
    fixes, (_, sent) = _q4_fixes(tp, seq)
    m = models.model(SP_MODEL)
    return (
        f"(a). Korthikanti et al. 2022, Table 2 (selective recomputation): s b h (10 + 24/t) without and "
        f"s b h x 34/t with sequence parallelism; the 10 s b h = {format_bytes(10 * seq * m.hidden)} of norms and "
        f"dropouts, identical on all {tp} GPUs, is divided by t: saved 10 x (1 - 1/{tp}) x {seq} x {m.hidden} B = "
        f"{format_bytes(sp.saved_bytes)} ({format_bytes(sp.without_bytes)} -> {format_bytes(sp.with_bytes)} per "
        f"layer). Each all-reduce becomes a reduce-scatter plus an all-gather of the same bytes, and the backward "
        f"re-gathers the two column-parallel inputs that each GPU kept only 1/t of (Megatron-LM): "
        f"{format_bytes(sent)} -> {format_bytes(fixes['a'][1])} per layer, one all-reduce's worth more. Full "
        f"recomputation (c) also cuts the duplicate but sends {format_bytes(fixes['c'][1])} (six all-reduces) and "
        f"runs the forward again; ZeRO-3 (d) shards model states, not activations; a larger t (b) leaves the "
        f"10 s b h replicated and moves TP beyond the node"
    )


def _ring(seq_len, cp, hidden, precision):
    return tensor.ring_attention_buffer(seq_len, cp, hidden, precision=precision)


def _q5(**ring) -> float:
    return _ring(**ring).buffer_bytes / 1e6


def _explain_q5(**ring) -> str:
    r = _ring(**ring)
    modeler = ": the modeler's '32 MB' is binary" if ring == RING else ""
    return (
        f"2 x S/N x H x bytes = 2 x {r.seq_len:,}/{r.cp} x {r.hidden:,} x {r.element_bytes:g} B = "
        f"{r.buffer_bytes:,.0f} B = {format_bytes(r.buffer_bytes)} (= {r.buffer_bytes / 2**20:g} MiB{modeler})"
    )


def _q5_hints(**ring):
    mib = _ring(**ring).buffer_bytes / 2**20
    return {
        1e6 / 2**20: f"looks like MiB: {mib:g} MiB = {mib * 2**20 / 1e6:.3g} MB (write '{mib:g} MiB' or convert)",
        **_MB_HINT,
    }


def _q6_ratios(tp=LAYER_TP) -> dict:
    """What each option of q6 says sequence parallelism does to TP's bytes sent per layer, as a ratio."""
    return {"a": 5 / 4, "b": 1.0, "c": 0.5, "d": 1 / tp}


def _q6() -> str:
    """The option whose ratio is what tensor.tp_layer_cost computes: with SP / without."""
    ratio = _layer(sequence_parallel=True).comm_bytes_per_gpu / _layer().comm_bytes_per_gpu
    (answer,) = [k for k, r in _q6_ratios().items() if abs(ratio - r) <= 1e-9 * r]
    return answer


def _explain_q6() -> str:
    plain, sp = _layer(), _layer(sequence_parallel=True)
    pairs = sum(cost.bytes_sent_per_gpu for name, cost in sp.collectives if "re-gather" not in name)
    return (
        f"(a). Each all-reduce becomes a reduce-scatter plus an all-gather, which is exactly how a ring all-reduce "
        f"works inside: the pairs send {format_bytes(pairs)} per layer, what the four all-reduces sent "
        f"({format_bytes(plain.comm_bytes_per_gpu)}). But each GPU now keeps only 1/t of the inputs of the two "
        f"column-parallel linears (QKV, MLP up), and their weight gradients need the whole input: Megatron-LM "
        f"all-gathers each again in the backward (megatron/mpu/layers.py, LinearWithGradAccumulationAndAsync"
        f"Communication), two all-gathers of half an all-reduce each: {format_bytes(sp.comm_bytes_per_gpu)} per layer, "
        f"{sp.all_reduces} all-reduce equivalents instead of {plain.all_reduces}. That is the price of keeping 1/t of "
        f"those inputs (Korthikanti et al. 2022's 34/t s b h); Megatron runs the re-gather beside the input-gradient "
        f"GEMM, so much of its time hides"
    )


#: q7: the profile of a Llama-2-7B layer at tp = 8, one 4,096-token sequence, before and after a change
def _q7_candidates(tp=LAYER_TP, seq=LAYER_SEQ):
    return {
        "a": _layer("ib-ndr", tp, seq),  # the TP group now spans nodes
        "b": _layer("nvlink4", tp, 8 * seq),  # an 8x longer sequence
        "c": _layer("nvlink4", tp, seq, sequence_parallel=True),  # sequence parallelism switched on
        "d": tensor.tp_layer_cost(LAYER_MODEL, tp, seq_len=seq, micro_batch_size=8, link="nvlink4"),  # 8 sequences
    }


def _q7_profile(tp=LAYER_TP, seq=LAYER_SEQ):
    """(before, after): (communication ms, compute ms) as the profile shows them; 'after' is the cross-node run."""
    before, after = _layer("nvlink4", tp, seq), _layer("ib-ndr", tp, seq)
    return [(c.comm_time_s * 1e3, c.compute_time_s * 1e3) for c in (before, after)]


def _q7(tp=LAYER_TP, seq=LAYER_SEQ) -> str:
    """The one change whose predicted (communication, compute) times match the profile's 'after'."""
    _, (comm, compute) = _q7_profile(tp, seq)
    (answer,) = [
        k
        for k, c in _q7_candidates(tp, seq).items()
        if abs(c.comm_time_s * 1e3 - comm) <= 1e-6 * comm and abs(c.compute_time_s * 1e3 - compute) <= 1e-6 * compute
    ]
    return answer


def _explain_q7(tp=LAYER_TP, seq=LAYER_SEQ) -> str:
    (c0, k0), (c1, k1) = _q7_profile(tp, seq)
    cands = _q7_candidates(tp, seq)
    return (
        f"(a). Compute is unchanged ({k0:.3g} ms), so the work per GPU is the same: not (b) or (d), which predict "
        f"{cands['b'].compute_time_s * 1e3:.3g} and {cands['d'].compute_time_s * 1e3:.3g} ms of compute. The bytes "
        f"are the same too, yet the all-reduces take {c1 / c0:.3g}x longer ({c0:.3g} -> {c1:.3g} ms): the "
        f"per-direction bandwidth fell from 450 GB/s (NVLink 4) to 50 GB/s (NDR), 9x on the bandwidth term; the "
        f"2(N-1) latency terms, a larger share on NVLink, bring the ratio down to {c1 / c0:.3g}. Sequence parallelism "
        f"(c) adds only its backward re-gathers on the same link: {cands['c'].comm_time_s * 1e3:.3g} ms, "
        f"{cands['c'].comm_time_s * 1e3 / c0:.3g}x"
    )


q1 = NumericQuestion(
    name="q1",
    params=dict(tp=Q1_TP),
    variants=Q1_VARIANTS,
    prompt="TP degree {tp} on an attention layer with d_model 4096, 32 heads of 128 (" + Q1_MODEL + "). How many "
    "Q/K/V projection parameters does each GPU hold?",
    expected=_qkv_per_gpu,
    explain=_explain_q1,
    hint_text="Q, K and V are three d_model x d_model matrices, each split by columns (heads) over the TP GPUs",
    unit="",
    rel_tol=0.0,
    noun="a number of parameters",
    scale_hint=lambda tp: {
        tp: "is the whole Q/K/V of the layer; each GPU holds 1/t of it",
        1 / 3: "counts one of the three projections; add K and V",
    },
)

q2 = NumericQuestion(
    name="q2",
    params=dict(tp=LAYER_TP, seq=QUESTION_SEQ),
    variants=LAYER_VARIANTS,
    prompt=LAYER_MODEL + ", tp={tp}, one microbatch of one {seq}-token sequence, bf16 activations: how many "
    "MB does each GPU send for the TP all-reduces of ONE layer in training (forward and backward)?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="4 ring all-reduces of b x s x h x 2 bytes per layer; each sends 2(N-1)/N of the buffer per GPU",
    unit="MB",
    noun="an amount of data",
    scale_hint=lambda tp, seq: {
        0.5: "counts only the two forward all-reduces; backward runs two more",
        tp / (2 * (tp - 1)): "counts M per all-reduce; a ring all-reduce sends 2(N-1)/N x M per GPU",
        **_MB_HINT,
    },
)


def _bandwidth_only_share(tp=LAYER_TP, seq=LAYER_SEQ) -> float:
    """The share of q3's answer left when the latency terms are forgotten (for the hint)."""
    c = _layer("ib-ndr", tp, seq)
    return sum(cost.bandwidth_time_s for _, cost in c.collectives) / c.comm_time_s


q3 = NumericQuestion(
    name="q3",
    params=dict(tp=LAYER_TP, seq=QUESTION_SEQ),
    variants=LAYER_VARIANTS,
    prompt="The same layer with its TP group spread over nodes on InfiniBand NDR (ib-ndr: 50 GB/s per direction, "
    "alpha 9.6 us): how long (ms) do the layer's 4 TP all-reduces take?",
    expected=_q3,
    explain=_explain_q3,
    hint_text="ring all-reduce time = 2(N-1) x alpha + 2(N-1)/N x M / B, four times",
    unit="ms",
    noun="a time",
    scale_hint=lambda tp, seq: {
        _bandwidth_only_share(tp, seq): "leaves out the latency: each ring all-reduce takes 2(N-1) steps of alpha",
        1e-3: "looks like seconds, but plain numbers are read in ms",
    },
)

_Q4 = _q4_numbers()
q4 = ChoiceQuestion(
    name="q4",
    prompt=f"Diagnosis: {SP_MODEL} with tensor parallelism t = {SP_TP}, one {SP_SEQ}-token sequence, selective "
    f"recomputation, runs out of memory. The memory profile shows {_Q4['total']:.0f} MB of saved activations per "
    f"layer on each GPU, of which {_Q4['replicated']:.0f} MB (LayerNorm and dropout tensors) are identical on all "
    f"{SP_TP} GPUs. Which change cuts that duplicate for the least tensor-parallel communication? (a) sequence "
    f"parallelism; (b) raise t to {2 * SP_TP}; (c) full recomputation; (d) ZeRO-3. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q4,
    explain=_explain_q4,
    hint_text="which tensors does tensor parallelism leave whole on every GPU, and which change splits them "
    "along another dimension?",
    feedback={
        "b": "divides only the attention and MLP activations again; the norms and dropouts stay whole on every GPU, "
        "and a TP group of more than 8 leaves the NVLink node",
        "c": "cuts the duplicate too, but recomputes the forward with two more all-reduces per layer (six, against "
        "the five all-reduce equivalents of sequence parallelism's pairs and backward re-gathers)",
        "d": "shards the model states (weights, gradients, Adam), not the activations",
    },
)

q5 = NumericQuestion(
    name="q5",
    params=Q5_RING,
    variants=RING_VARIANTS,
    prompt="Ring attention (context parallelism): a {seq_len:,}-token sequence over {cp} GPUs, hidden {hidden}, FP8 "
    "(1 byte). "
    "How large (MB = 10^6 bytes) is each GPU's KV ring buffer, 2 x S/N x H x bytes?",
    expected=_q5,
    explain=_explain_q5,
    hint_text="2 x (S/N) x H x bytes per element; mind MB (10^6) against MiB (2^20)",
    unit="MB",
    noun="an amount of memory",
    scale_hint=_q5_hints,
)

q6 = ChoiceQuestion(
    name="q6",
    prompt="Megatron-LM's sequence parallelism is switched on next to tensor parallelism. What happens to the bytes "
    "each GPU sends for TP per layer in training? (a) they grow by a quarter: the reduce-scatter/all-gather pairs send "
    "what the four all-reduces sent, and the backward all-gathers the two column-parallel inputs again; (b) they "
    "stay the same: each all-reduce becomes a reduce-scatter plus an all-gather; (c) they halve; (d) they fall by t, "
    "since each GPU holds 1/t of the sequence. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q6,
    explain=_explain_q6,
    hint_text="a ring all-reduce is a reduce-scatter followed by an all-gather; then ask what a linear's weight "
    "gradient needs when each GPU kept only 1/t of that linear's input",
    feedback={
        "b": "counts the pairs, which do send what the all-reduces sent, but not the backward: each GPU kept only 1/t "
        "of the QKV and MLP-up inputs, and their weight gradients need the whole input, so Megatron gathers each again",
        "c": "counts only one of the two halves: the reduce-scatter and the all-gather each move (N-1)/N x M",
        "d": "confuses where the activations live with what is sent: the full b x s x h tensor is still reduced",
    },
)

_BEFORE, _AFTER = _q7_profile()
q7 = ChoiceQuestion(
    name="q7",
    prompt=f"Diagnosis: a profile of one {LAYER_MODEL} layer at t = {LAYER_TP}, one {LAYER_SEQ}-token sequence, "
    f"shows {_BEFORE[0]:.3g} ms of TP all-reduces and {_BEFORE[1]:.3g} ms of compute. After a change to the job the "
    f"same layer shows {_AFTER[0]:.3g} ms of all-reduces and {_AFTER[1]:.3g} ms of compute. What changed? (a) the "
    "TP group now spans two nodes (InfiniBand NDR); (b) the sequence is 8x longer; (c) sequence parallelism was "
    "switched on; (d) the micro-batch grew to 8 sequences. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q7,
    explain=_explain_q7,
    hint_text="which of the two times stayed put, and what does that say about the work and the bytes? Then "
    "compare the ratio of the communication times with the links' bandwidths",
    feedback={
        "b": "would change compute too: 8x the tokens is 8x (or more) the FLOPs",
        "c": "adds only the backward re-gathers, a quarter more bytes over the same link: 1.25x, not 7.4x",
        "d": "would change compute too: 8 sequences are 8x the FLOPs and 8x the bytes",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7)}
