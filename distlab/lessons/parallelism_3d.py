"""Graded questions of lesson 6, 3D parallelism. Every expected value is computed by distlab.mesh
(rank layouts) and distlab.memory (memory per GPU).

Group answers are lists of ranks, checked by RanksQuestion (defined here: a list answer is
particular to this lesson).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Callable

from .. import memory, mesh
from ..units import format_bytes
from dataclasses import field

from .questions import (
    CORRECT,
    INCORRECT,
    NOT_ATTEMPTED,
    ChoiceQuestion,
    CheckResult,
    Hint,
    NumericQuestion,
    Solution,
    bind_params,
    is_unanswered,
)

__all__ = ["EXAMPLE", "WORKED", "SIXTY_FOUR", "MAX_LIST_CHARS", "read_int_list", "RanksQuestion", "QUESTIONS"]

# Megatron-LM's documented example (megatron/core/parallel_state.py): 16 GPUs, tp=2, pp=4, hence dp=2.
EXAMPLE = dict(gpus=16, tp=2, pp=4)
# The MIT 6.5940 worked example: a 530B model, T=8, P=12, D=21 (2,016 GPUs), ZeRO-1.
WORKED = dict(params=530e9, tp=8, pp=12, dp=21)
# A 64-GPU layout on 8-GPU nodes, in Megatron's order and reversed.
SIXTY_FOUR = dict(gpus=64, tp=8, pp=2, gpus_per_node=8)


def _as_int(value, where: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{where} {value!r} is a yes/no value, not a GPU number")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(float(value))
    raise ValueError(f"{where} {value!r} is not a whole number")


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
class RanksQuestion:
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

    def check(self, answer=None) -> CheckResult:
        if is_unanswered(answer):
            return CheckResult(self.name, NOT_ATTEMPTED, "not attempted", 0.0, self.points)
        try:
            values = self._read(answer)
        except ValueError as unreadable:
            return CheckResult(self.name, INCORRECT, f"not yet, because {unreadable}", 0.0, self.points)
        except Exception as exc:  # an object that cannot even be iterated or compared: a reason, not a crash
            return CheckResult(
                self.name,
                INCORRECT,
                f"not yet, because an answer of type {type(answer).__name__} "
                f"could not be read as {self.noun} ({type(exc).__name__})",
                0.0,
                self.points,
            )
        want = [int(v) for v in self.expected()]
        if (values == want) if self.ordered else (sorted(values) == sorted(want)):
            return CheckResult(self.name, CORRECT, "correct", self.points, self.points)
        shown = "[" + ", ".join(map(str, values)) + "]"
        if self.ordered:
            import math

            if sorted(values) == sorted(want):
                reason = "has the right numbers in the wrong order"
            elif math.prod(values) == math.prod(want):
                reason = f"has the right product ({math.prod(want)}) but not the right sizes"
            else:
                reason = f"multiplies to {math.prod(values)}, not {math.prod(want)}"
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
        message = f"not yet, because {shown} {reason}. Hint: {self.hint_text}"
        return CheckResult(self.name, INCORRECT, message, 0.0, self.points)

    def hint(self) -> Hint:
        return Hint(self.hint_text)

    def solution(self) -> Solution:
        return Solution(self.explain())


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
    return memory.training_memory(WORKED["params"], zero=1, dp=WORKED["dp"], tp=WORKED["tp"], pp=WORKED["pp"])


def _q4() -> float:
    return _worked().total_bytes / 1e9


def _explain_q4() -> str:
    bd = _worked()
    t, p, d = WORKED["tp"], WORKED["pp"], WORKED["dp"]
    shard = WORKED["params"] / (t * p)
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


q1 = NumericQuestion(
    name="q1",
    params=dict(tp=4, pp=4, dp=16),
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
    prompt="The lecture's worked example: a 530B model with T=8, P=12, D=21 and ZeRO-1 (mixed precision, Adam). "
    "Model-state memory per GPU, in GB?",
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

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6)}
