"""Graded questions of lesson 6, 3D parallelism. Every expected value is computed by distlab.mesh
(rank layouts) and distlab.memory (memory per GPU).

Group answers are lists of ranks, checked by RanksQuestion (defined here: a list answer is
particular to this lesson).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable

from .. import hardware, memory, mesh
from ..units import format_bytes
from dataclasses import field

from .questions import (
    Question,
    ChoiceQuestion,
    NumericQuestion,
    bind_params,
)

__all__ = [
    "EXAMPLE",
    "WORKED",
    "SIXTY_FOUR",
    "QUIZ8",
    "QUIZ9",
    "QUIZ9_OPTIONS",
    "QUIZ9_HEADROOM_GB",
    "MAX_LIST_CHARS",
    "read_int_list",
    "RanksQuestion",
    "QUESTIONS",
]

# Megatron-LM's documented example (megatron/core/parallel_state.py): 16 GPUs, tp=2, pp=4, hence dp=2.
EXAMPLE = dict(gpus=16, tp=2, pp=4)
# The MIT 6.5940 worked example: a 530B model, T=8, P=12, D=21 (2,016 GPUs), ZeRO-1.
WORKED = dict(params=530e9, tp=8, pp=12, dp=21)
# q4: the same model and layout with twice the data-parallel groups (the lesson works D = 21)
Q4 = dict(WORKED, dp=42)
# A 64-GPU layout on 8-GPU nodes, in Megatron's order and reversed.
SIXTY_FOUR = dict(gpus=64, tp=8, pp=2, gpus_per_node=8)
# The MIT 6.5940 lecture's quiz 8 (ch. 8): a 13B model on 64 A100 80 GB, ZeRO-3 over the data-parallel group, P = 4,
# no TP; model states only.
QUIZ8 = dict(billions=13, gpus=64, pp=4, gpu="a100-80gb")
# Its quiz 9 (ch. 9): a 7B model on 8 A100 80 GB; the least sharding whose model states leave room for activations.
QUIZ9 = dict(params=7e9, gpus=8, gpu="a100-80gb")
QUIZ9_HEADROOM_GB = 10.0
#: the options of quiz 9, least sharding first (the expected answer is the first that fits)
QUIZ9_OPTIONS = ("plain dp", "zero-1", "zero-2", "zero-3", "tp 8")


def _as_int(value, where: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{where} {value!r} is a yes/no value, not a GPU number")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(float(value))
    raise ValueError(f"{where} {value!r} is not a whole number")


def _product_text(n: int) -> str:
    """`n` written out, or its size past 30 digits (str() of an int refuses more than 4,300: the product of an answer's
    4,096 huge entries raised ValueError out of check(), red team round 17)."""
    return str(n) if abs(n) < 10**30 else f"a number of about {int(abs(n).bit_length() * 0.30103) + 1:,} digits"


#: a list of ranks written as text has at most this many characters
MAX_LIST_CHARS = 2_000


def read_int_list(text: str, max_chars: int = MAX_LIST_CHARS) -> list[int] | None:
    """The whole numbers of '5, 7', '[5, 7]', '(5 7)' or '{5,7,}', or None when the text is not such a list.

    One pass over at most max_chars characters (no regular expression): an optional bracket, numbers
    (an optional minus sign, at most 9 digits) separated by spaces or one comma, an optional last comma
    and closing bracket.

    >>> read_int_list(" [4, 5 ,6,] "), read_int_list("1 2x")
    ([4, 5, 6], None)
    """
    text = text.strip()
    if len(text) > max_chars or not text:
        return None
    if text[0] in "[({":
        text = text[1:]
    if text and text[-1] in "])}":
        text = text[:-1]
    values, number, commas = [], "", 0
    for c in text + " ":
        if c.isdigit() and c.isascii() or (c == "-" and not number):
            number += c
            if len(number) > 10:
                return None
            continue
        if number:
            if number == "-":
                return None
            values.append(int(number))
            number, commas = "", 0
        if c == ",":
            commas += 1
            if commas > 1 or not values:
                return None
        elif not c.isspace():
            return None
    return values or None


@dataclass(frozen=True)
class RanksQuestion(Question):
    """A question answered by a list of whole numbers: GPU ranks of a group (any order, ordered=False)
    or a shape (ordered=True). Accepts a list, tuple, set, range, 1-D NumPy array, or a string such
    as '5, 7' or '[5, 7]'."""

    name: str
    prompt: str
    expected: Callable[[], list]
    explain: Callable[[], str]
    hint_text: str
    ordered: bool = False
    points: float = 1.0
    noun: str = "a list of GPU ranks"
    #: the question's setup and the choices a per-student variant may draw (as NumericQuestion's)
    params: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> list:
        if isinstance(answer, str):
            values = read_int_list(answer)
            if values is None:
                shown = answer if len(answer) <= 40 else answer[:37] + "..."
                raise ValueError(f"{shown!r} could not be read as {self.noun} (write e.g. [5, 7])")
            return values
        if type(answer).__name__ == "ndarray" and type(answer).__module__ == "numpy":
            if answer.ndim != 1:
                raise ValueError(f"an array of shape {answer.shape} is not {self.noun}; give a flat list")
            answer = answer.tolist()
        if isinstance(answer, (list, tuple, set, frozenset, range)):
            values = [_as_int(v, "the entry") for v in answer]
            if isinstance(answer, (set, frozenset)) and self.ordered:
                raise ValueError("a set has no order; give a list")
            return values
        if isinstance(answer, (numbers.Number, bool)):
            raise ValueError(f"{answer!r} is one number, not {self.noun} (write e.g. [5, 7])")
        raise ValueError(f"an answer of type {type(answer).__name__} is not {self.noun}")

    def _judge(self, values: list) -> str | None:
        want = [int(v) for v in self.expected()]
        if (values == want) if self.ordered else (sorted(values) == sorted(want)):
            return None
        shown = "[" + ", ".join(map(str, values)) + "]"
        if self.ordered:
            import math

            if sorted(values) == sorted(want):
                reason = "has the right numbers in the wrong order"
            elif math.prod(values) == math.prod(want):
                reason = f"has the right product ({math.prod(want)}) but not the right sizes"
            else:
                reason = f"multiplies to {_product_text(math.prod(values))}, not {math.prod(want)}"
        elif len(set(values)) != len(values):
            reason = "names a GPU more than once"
        else:
            missing = sorted(set(want) - set(values))
            extra = sorted(set(values) - set(want))
            parts = []
            if missing:
                parts.append("leaves out " + ", ".join(map(str, missing)))
            if extra:
                parts.append(
                    "includes "
                    + ", ".join(map(str, extra))
                    + (" which does not belong" if len(extra) == 1 else " which do not belong")
                )
            reason = " and ".join(parts)
        return f"{shown} {reason}"


def _example():
    return mesh.layout(EXAMPLE["gpus"], tp=EXAMPLE["tp"], pp=EXAMPLE["pp"])


def _q1(tp=4, pp=4, dp=16) -> int:
    return mesh.layout(tp=tp, pp=pp, dp=dp).world_size


def _explain_q1(tp=4, pp=4, dp=16) -> str:
    return f"N = D x T x P = {dp} x {tp} x {pp} = {_q1(tp, pp, dp)}; there are {pp} pipeline stages"


def _q2(rank=5) -> list:
    return _example().group_of(rank, "dp")


def _explain_q2(rank=5) -> str:
    lay = _example()
    c = lay.coords(rank)
    return (
        f"Order tp-dp-pp, tp fastest: rank = tp + 2 dp + 4 pp. GPU {rank} = {c['tp']} + 2 x {c['dp']} + 4 x "
        f"{c['pp']}; its DP group varies dp only (stride {lay.strides['dp']}): {lay.group_of(rank, 'dp')}. "
        f"Megatron-LM lists the "
        f"DP groups as {lay.groups('dp').tolist()}"
    )


def _q3(rank=6) -> list:
    return _example().group_of(rank, "pp")


def _explain_q3(rank=6) -> str:
    lay = _example()
    c = lay.coords(rank)
    return (
        f"Pipeline neighbours are tp x dp = {lay.strides['pp']} ranks apart: GPU {rank} has tp rank {c['tp']}, dp "
        f"rank {c['dp']}, and its PP group is {lay.group_of(rank, 'pp')} (stages 0 to {lay.pp - 1})"
    )


def _worked():
    return memory.training_memory(Q4["params"], zero=1, dp=Q4["dp"], tp=Q4["tp"], pp=Q4["pp"])


def _q4() -> float:
    return _worked().total_bytes / 1e9


def _explain_q4() -> str:
    bd = _worked()
    t, p, d = Q4["tp"], Q4["pp"], Q4["dp"]
    shard = Q4["params"] / (t * p)
    return (
        f"Each GPU owns 530e9 / ({t} x {p}) = {shard / 1e9:.2f}e9 parameters; ZeRO-1 keeps weights and gradients "
        f"(2 + 2 bytes) and a 1/{d} share of the 12 optimizer bytes: {shard / 1e9:.2f}e9 x (4 + 12/{d}) = "
        f"{format_bytes(bd.total_bytes)} of model states per GPU (activations not counted)"
    )


def _reversed():
    return mesh.layout(
        SIXTY_FOUR["gpus"],
        tp=SIXTY_FOUR["tp"],
        pp=SIXTY_FOUR["pp"],
        order="pp-dp-tp",
        gpus_per_node=SIXTY_FOUR["gpus_per_node"],
    )


def _q5() -> str:
    kind = _reversed().link_kind("tp")
    return "inter-node" if kind != "intra-node" else "intra-node"


def _explain_q5() -> str:
    lay = _reversed()
    return (
        f"With order pp-dp-tp, tp varies slowest: TP neighbours are {lay.strides['tp']} ranks apart, so GPU 0's TP "
        f"group is {lay.group_of(0, 'tp')}, one GPU on each of {lay.nodes} nodes. Every TP all-reduce (4 per "
        f"layer per microbatch) then crosses the inter-node link; in Megatron's order the same group is "
        f"{mesh.layout(64, tp=8, pp=2).group_of(0, 'tp')}, inside node 0"
    )


def _q6() -> list:
    return list(_example().device_mesh().mesh_shape)


def _explain_q6() -> str:
    spec = _example().device_mesh()
    return (
        f"torch lays ranks out row-major (the last mesh dimension fastest), so Megatron's tp-dp-pp (tp fastest) "
        f"becomes mesh_dim_names {spec.mesh_dim_names} with mesh_shape {spec.mesh_shape}: {spec.code()}"
    )


def _quiz8(billions=QUIZ8["billions"], pp=QUIZ8["pp"]):
    dp, params = QUIZ8["gpus"] // pp, billions * 1e9
    return memory.training_memory(params, zero=3, dp=dp, pp=pp, gpu=QUIZ8["gpu"], count_activations=False)


def _q7(billions=QUIZ8["billions"], pp=QUIZ8["pp"]) -> float:
    return _quiz8(billions, pp).total_bytes / 1e9


def _explain_q7(billions=QUIZ8["billions"], pp=QUIZ8["pp"]) -> str:
    dp, params = QUIZ8["gpus"] // pp, billions * 1e9
    stage = params / pp
    return (
        f"P = {pp} leaves D = 64 / {pp} = {dp} replicas of each stage; a stage holds {params / 1e9:g}e9 / {pp} = "
        f"{stage / 1e9:.3g}e9 parameters, and ZeRO-3 splits all 16 bytes of each over the D = {dp} GPUs of its "
        f"data-parallel group: 16 x {stage / 1e9:.3g}e9 / {dp} = {format_bytes(_quiz8(billions, pp).total_bytes)} "
        f"per GPU, 16 Psi / N with N = P x D = 64 GPUs (the lecture's {16 * params / QUIZ8['gpus'] / 1e9:g} GB)"
    )


def _q7_hints(billions, pp):
    dp = QUIZ8["gpus"] // pp
    return {
        dp: "is a whole stage's 16 bytes per parameter: ZeRO-3 also splits them over the data-parallel group",
        pp: "is the whole model sharded over the data-parallel group only: the pipeline splits it first",
    }


def _quiz9_state(option: str) -> float:
    """Model-state bytes per GPU of one option of quiz 9 (7B on 8 GPUs, mixed-precision Adam)."""
    n, params = QUIZ9["gpus"], QUIZ9["params"]
    if option == "tp 8":
        return memory.training_memory(params, tp=n, count_activations=False).total_bytes
    zero = 0 if option == "plain dp" else int(option[-1])
    return memory.training_memory(params, zero=zero, dp=n, count_activations=False).total_bytes


def _q8() -> str:
    room = memory.gpu_capacity(QUIZ9["gpu"])[0] - float(QUIZ9_HEADROOM_GB) * 1e9
    return next(o for o in QUIZ9_OPTIONS if _quiz9_state(o) <= room)


def _quiz9_capacity() -> str:
    """The quiz's "80 GB" A100 as CUDA sees it: '85.1 GB (sold as 80 GB HBM2e; CUDA sees 79.25 GiB)'."""
    acc = hardware.accelerator(QUIZ9["gpu"])
    return f"{format_bytes(acc.memory_bytes)} ({acc.memory_text()})"


def _explain_q8() -> str:
    rows = ", ".join(f"{o}: {format_bytes(_quiz9_state(o))}" for o in QUIZ9_OPTIONS)
    return (
        f"model states per GPU of a 7B model on 8 GPUs ({rows}); plain DP keeps all 16 B x 7e9 = 112 GB on every GPU; "
        f"ZeRO-1 keeps 2 + 2 + 12/8 = 5.5 B per parameter, about 38.5 GB, and leaves more than "
        f"{QUIZ9_HEADROOM_GB:g} GB of the {_quiz9_capacity()} for activations: the least sharding that fits is {_q8()}. ZeRO-2 "
        f"and ZeRO-3 fit too but shard more than needed (ZeRO-3 adds half as much traffic again); TP 8 fits, at "
        f"four all-reduces per layer"
    )


q1 = NumericQuestion(
    name="q1",
    params=dict(tp=8, pp=4, dp=32),
    variants=dict(tp=(2, 4, 8), pp=(2, 4, 8, 12), dp=(4, 8, 16, 32)),
    prompt="A cluster uses 3D parallelism with T={tp} (tensor), P={pp} (pipeline) and D={dp} (data). How many GPUs "
    "does it need?",
    expected=_q1,
    explain=_explain_q1,
    hint_text="every GPU has one coordinate along each of the three dimensions",
    unit="",
    rel_tol=0.0,
    noun="a number of GPUs",
)

q2 = RanksQuestion(
    name="q2",
    params=dict(rank=5),
    variants=dict(rank=(1, 3, 5, 6, 9, 10, 12, 14)),
    prompt="Megatron-LM's example: 16 GPUs, tp=2, pp=4 (so dp=2), order tp-dp-pp. Which GPUs form the DATA-parallel "
    "group of GPU {rank}?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="write {rank} as tp + 2 x dp + 4 x pp and vary dp only",
)

q3 = RanksQuestion(
    name="q3",
    params=dict(rank=6),
    variants=dict(rank=(2, 3, 5, 6, 9, 12)),
    prompt="Same layout: which GPUs form the PIPELINE group of GPU {rank} (one GPU per stage)?",
    expected=_q3,
    explain=_explain_q3,
    hint_text="pipeline neighbours are tp x dp ranks apart",
)

q4 = NumericQuestion(
    name="q4",
    prompt=f"The lesson's 530B model with T={Q4['tp']}, P={Q4['pp']} and twice the data-parallel groups, "
    f"D={Q4['dp']} ({Q4['tp'] * Q4['pp'] * Q4['dp']:,} GPUs), with ZeRO-1 (mixed precision, Adam). Model-state memory "
    "per GPU, in GB?",
    expected=_q4,
    explain=_explain_q4,
    hint_text="TP and PP divide all parameters; ZeRO-1 also divides the 12 optimizer bytes by D",
    unit="GB",
    noun="an amount of memory",
    scale_hint={1e9: "looks like bytes, but plain numbers are read in GB"},
)

q5 = ChoiceQuestion(
    name="q5",
    prompt="64 GPUs on 8-GPU nodes, tp=8, pp=2, dp=4, but with the order reversed to pp-dp-tp. Which link do the TP "
    "all-reduces run on? ('intra-node' or 'inter-node')",
    options=("intra-node", "inter-node"),
    expected=_q5,
    explain=_explain_q5,
    hint_text="in pp-dp-tp, tp varies slowest: how far apart are two GPUs of one TP group?",
)

q6 = RanksQuestion(
    name="q6",
    prompt="Express Megatron's 16-GPU example (tp=2, dp=2, pp=4, order tp-dp-pp) as a torch DeviceMesh: what is "
    "mesh_shape, outermost dimension first?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="torch's last mesh dimension varies fastest; Megatron's first dimension varies fastest",
    ordered=True,
    noun="a shape (a list of sizes)",
)

q7 = NumericQuestion(
    name="q7",
    params=dict(billions=QUIZ8["billions"], pp=QUIZ8["pp"]),
    variants=dict(billions=(7, 13, 34, 70), pp=(2, 4, 16)),  # pp = 8 would make D = P: one ratio, two mistakes
    prompt="MIT 6.5940's quiz 8 (ch. 8): a {billions}B-parameter model on 64 A100s (80 GB), ZeRO-3 over the data-parallel "
    "group, pipeline parallelism with P = {pp}, no tensor parallelism, mixed-precision Adam. Estimate by hand the "
    "model-state memory per GPU (GB), activations not counted.",
    expected=_q7,
    explain=_explain_q7,
    hint_text="first split the layers over the stages, then see how many GPUs share each stage and what ZeRO-3 "
    "shards among them",
    unit="GB",
    noun="an amount of memory",
    scale_hint=_q7_hints,
)

q8 = ChoiceQuestion(
    name="q8",
    prompt="MIT 6.5940's quiz 9 (ch. 9): a 7B model on 8 A100s (80 GB each), mixed-precision Adam. Which is the LEAST "
    "sharding whose model states leave at least 10 GB per GPU for activations? (" + ", ".join(QUIZ9_OPTIONS) + ")",
    options=QUIZ9_OPTIONS,
    expected=_q8,
    explain=_explain_q8,
    hint_text="count bytes per parameter for each option: what does each ZeRO stage divide by the 8 GPUs?",
    feedback={
        "plain dp": "replicates everything: 16 bytes x 7e9 = 112 GB on every GPU, more than 80 GB (adding GPUs "
        "to plain data parallelism never lowers the memory per GPU)",
        "zero-2": "fits, but ZeRO-1 already does: sharding the 12 optimizer bytes alone brings 16 B to 5.5 B per "
        "parameter; ask for the least sharding",
        "zero-3": "fits, but shards more than needed: ZeRO-3 gathers the weights before every layer, half as much "
        "traffic again as plain data parallelism, and ZeRO-1 already fits",
        "tp 8": "fits, but splits every matmul and adds four all-reduces per layer on the critical path, where "
        "sharding the optimizer state (no extra traffic) already fits",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
