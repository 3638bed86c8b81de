"""Red team round 30: a student who types no correct answer but tries to score. Each test keeps the attack and what
must hold. Every attack of this round held: no product change was needed.

01-lying-answer-objects (held): answers that compare equal to anything or lie about their value (a custom __eq__,
__hash__, __float__, __index__, __int__, __format__, __repr__ or __iter__; str, float, int, list, dict and ndarray
subclasses; a class registered as numbers.Real; a fake pint Quantity; NaN of Python, numpy and Decimal; a long
double, a Fraction, 10**4299, -10**18, complex; object and masked arrays; containers of liars) are encoded by the
kernel's own collector (kernel_side.collect_answers, run here as the kernel runs it), decoded as the grader decodes
them, and checked by every question of every graded lesson, with the default numbers and two per-student variants:
none is correct. By construction: what reaches a check is only what `answers.decode` builds (None, bool, int,
float, str, list, tuple, set, frozenset, dict, a numeric or text ndarray, an OpaqueAnswer), never the student's
object, so a lie can only choose which plain value is sent, as typing it would.
02-one-hostile-kernel (held, one bubblewrap kernel without the audit hook, graded as `distlab grade` grades): the
lying objects as lesson 1's answers; the checker changed inside the kernel (NumericQuestion/ChoiceQuestion
_judge and _read, every question's check); a .pth, sitecustomize.py and usercustomize.py written into every folder
on sys.path and the student view, its bytecode overwritten (every one refused: read-only); the answer key looked for in every file under the
folders the kernel imports from, /opt, /run and /tmp, in its environment and process 1's, and among its live
objects (a real NumericQuestion): nothing of the key is there, nothing is written, and lesson 1
scores only the one answer computed with distlab's own formula (memory.training_memory with q2's parameters).
That is legitimate work, not an attack: the exercise says "Use distlab or pencil and paper", the student view
keeps the formula modules because "using them is what the lessons teach", and the answer key is not protected
from the student at home (instructor/grading-threat-model.md, Assets).
03-pickled-reply (held): a kernel reply whose content is a pickle that runs a command when loaded is refused as
text by the grader's session, which unpacks JSON only; the command never runs.
"""

from __future__ import annotations

import contextlib
import decimal
import fractions
import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from distlab.grading import kernel_side
from distlab.grading.answers import MAX_ANSWER_CHARS, OpaqueAnswer, check_answers, parse_answers
from distlab.grading.kernel import run_in_kernel
from distlab.lessons import LESSONS
from distlab.lessons.questions import CORRECT
from distlab.lessons.variants import lesson_variant
from test_redteam_default_round2 import needs_bwrap

#: the lying answers, as a student's cell defines them (run here for 01, sent to the kernel for 02)
LIARS = r"""
import numbers, numpy as np

class AnyEq:
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    def __hash__(self): return 0
    def __lt__(self, o): return False
    def __le__(self, o): return True
    def __float__(self): return float("nan")
    def __index__(self): return 1
    def __int__(self): return 1
    def __format__(self, spec): return "correct"
    def __repr__(self): return "correct"
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __contains__(self, x): return True
numbers.Real.register(AnyEq)

class EqStr(str):
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    __hash__ = str.__hash__
    def strip(self, *a): return self
    def lower(self): return self
    def upper(self): return self
    def __str__(self): return "b"

class EqFloat(float):
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    __hash__ = float.__hash__
    def __float__(self): return float("nan")
    def __repr__(self): return "42.0"
    def __sub__(self, o): return 0.0
    __rsub__ = __sub__
    def __abs__(self): return 0.0

class EqInt(int):
    def __eq__(self, o): return True
    __hash__ = int.__hash__
    def __int__(self): return 10**5000
    def __index__(self): return -1
    def __repr__(self): return "7"

class EqList(list):
    def __eq__(self, o): return True
    def __iter__(self): return iter(["F0", 1, "B0"])
    def __len__(self): return 10**9

class EqDict(dict):
    def __contains__(self, k): return True
    def __getitem__(self, k): return EqFloat(1.0)
    def items(self): return iter([("tp", AnyEq())])
    def __eq__(self, o): return True

class EqArr(np.ndarray):
    def __eq__(self, o): return np.ones(1, bool)
    def __ne__(self, o): return np.zeros(1, bool)
    def tolist(self): return AnyEq()

class Quantity:  # named and placed as pint's, to pass the collector's test for one
    magnitude = 1.0
    units = "GB"
Quantity.__module__ = "pint.fake"
"""


def _liars() -> list:
    space: dict = {}
    exec(compile(LIARS, "<liars>", "exec"), space)  # noqa: S102 -- the test's own text
    s = space
    return [
        s["AnyEq"](),
        s["EqStr"]("zz"),
        s["EqFloat"](1.5),
        s["EqInt"](3),
        s["EqList"](),
        s["EqDict"](layout={}),
        np.arange(4).view(s["EqArr"]),
        np.array(2.0).view(s["EqArr"]),
        s["Quantity"](),
        float("nan"),
        -float("nan"),
        float("inf"),
        np.float64("nan"),
        np.longdouble(1.5),
        10**4299,
        -(10**18),
        fractions.Fraction(1, 3),
        decimal.Decimal("NaN"),
        decimal.Decimal("sNaN"),
        1 + 2j,
        np.array([np.nan] * 8),
        np.array([s["EqFloat"](1), s["EqStr"]("q")], dtype=object),
        np.ma.masked_array([1, 2, 3], mask=[1, 1, 1]),
        [s["AnyEq"]()] * 8,
        {s["EqStr"]("x")},
        {"layout": {"tp": s["AnyEq"]()}, "days": s["AnyEq"](), "cost_usd": s["AnyEq"](), "memory_gb": s["AnyEq"]()},
    ]


_PLAIN = (type(None), bool, int, float, str, OpaqueAnswer)


def _plain(value) -> bool:
    """True when `value` is built only of the types answers.decode makes."""
    if isinstance(value, (list, tuple, set, frozenset)) and type(value) in (list, tuple, set, frozenset):
        return all(_plain(x) for x in value)
    if type(value) is dict:
        return all(_plain(k) and _plain(x) for k, x in value.items())
    if type(value) is np.ndarray:
        return value.dtype.kind in "biufcU" or all(_plain(x) for x in value.tolist())
    return value is Ellipsis or type(value) in _PLAIN[:-1] or isinstance(value, OpaqueAnswer)


# ---- 01: lying answer objects ------------------------------------------------------------------------------------


def test_no_lying_answer_object_passes_any_question_of_any_lesson():
    """01: each liar as every answer_qN, through the kernel's own collector and the grader's decoder, checked by every
    lesson's questions (default numbers and two variants): never correct, and what the check saw is plain data."""
    names = [f"answer_q{i}" for i in range(1, 13)]
    question_sets = [
        lesson_variant(slug, seed)
        for slug, entry in LESSONS.items()
        if entry.questions
        for seed in (None, "rt30-a", "rt30-b")
    ]
    for liar in _liars():
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            kernel_side.collect_answers({n: liar for n in names}, "0" * 32, names, MAX_ANSWER_CHARS, 10_000)
        answers = parse_answers(printed.getvalue(), "0" * 32, set(names))
        assert answers is not None and set(answers) == set(names), (type(liar), printed.getvalue()[:300])
        assert all(_plain(v) for v in answers.values()), (type(liar), answers["answer_q1"])
        for questions in question_sets:
            scored = [g for g in check_answers(questions, answers) if g.status == CORRECT or g.points]
            assert not scored, (type(liar), answers["answer_q1"], scored)


# ---- 02: one hostile kernel --------------------------------------------------------------------------------------

#: the exercise's own first cell (exercises/01_memory_wall.ipynb)
IMPORTS = "from distlab import hardware, memory, models\nfrom distlab.lessons.memory_wall import q1, q2, q3, q4, q5, q6, q7, q8\n"

#: change the checker in the kernel, write import-time hooks everywhere, look for the key; the findings as answer_x
ATTACK = r"""
import gc, glob, json, os, sys
import distlab.lessons.questions as Q
for cls in (Q.NumericQuestion, Q.ChoiceQuestion, Q.SequenceQuestion):
    cls._judge = lambda self, v: None
    cls._read = lambda self, a: a
for q in (q1, q2, q3, q4, q5, q6, q7, q8):
    try:
        object.__setattr__(q, "check", lambda a=None, _q=q: Q.CheckResult(_q.name, "correct", "correct", 1.0, 1.0))
    except Exception:
        pass
probe = {"written": [], "key": [], "objects": [], "env": [], "read": 0}
folders = [p for p in sys.path if p] + ["/opt/distlab-view/distlab", "/opt/distlab-view/distlab/lessons/__pycache__"]
for folder in folders:
    for name in ("zz_rt30.pth", "sitecustomize.py", "usercustomize.py"):
        try:
            with open(os.path.join(folder, name), "w") as f:
                f.write("import os\n")
            probe["written"].append(os.path.join(folder, name))
        except OSError:
            pass
for pyc in glob.glob("/opt/distlab-view/distlab/**/*.pyc", recursive=True):
    try:
        with open(pyc, "r+b") as f:
            f.write(b"\0")
        probe["written"].append(pyc)
    except OSError:
        pass
MARKS = (b"def _explain_q", b"def _state_gb", b"BEGIN SOLUTION", b"explain=_explain", b"NumericQuestion(\n")
roots = {p for p in sys.path if p.startswith("/") and os.path.isdir(p)} | {"/opt", "/run", "/tmp"}
for root in sorted(roots):
    for top, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(top, name)
            try:
                if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) < 4_000_000:
                    with open(path, "rb") as f:
                        data = f.read()
                    probe["key"] += [[path, m.decode()] for m in MARKS if m in data]
                    probe["read"] += path.startswith("/opt/distlab-view/distlab/lessons/")
            except OSError:
                pass
probe["objects"] = sorted({type(o).__name__ for o in gc.get_objects()} & {"NumericQuestion", "ChoiceQuestion"})
for source in ("/proc/self/environ", "/proc/1/environ"):
    try:
        with open(source, "rb") as f:
            probe["env"] += [e.decode("latin-1") for e in f.read().split(b"\0") if b"SECRET" in e or b"KEY" in e]
    except OSError:
        pass
answer_x = json.dumps(probe)[:9_000]
"""

#: lesson 1's answers: liars, and q2 computed with distlab's own formula from the question's own parameters
ANSWERS = (
    "answer_q1 = AnyEq()\n"
    "answer_q2 = memory.training_memory(q2.params['billions'] * 1e9).total_bytes / 1e9\n"
    "answer_q3 = EqFloat(480.0)\n"
    "answer_q4 = EqList()\n"
    "answer_q5 = EqStr('zz')\n"
    "answer_q6 = np.arange(16).view(EqArr)\n"
    "answer_q7 = Quantity()\n"
    "answer_q8 = EqInt(16)\n"
)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """One bubblewrap kernel (no audit hook: the operating system's boundary alone) running the attack: (answers,
    problems); the grader checks lesson 1's answers as `distlab grade` does."""
    base = tmp_path_factory.mktemp("rt30")
    (base / "submission.ipynb").write_text("{}")
    problems: list[str] = []
    names = [f"answer_q{i}" for i in range(1, 9)] + ["answer_x"]
    answers = run_in_kernel(
        [IMPORTS, LIARS, ATTACK, ANSWERS],
        base / "work",
        answer_names=names,
        timeout=240,
        cell_timeout=200,
        sandbox="bwrap",
        memory_limit=8 * 2**30,
        file_size_limit=64 * 2**20,
        problems=problems,
        audit_hook=False,
    )
    return answers, problems


@needs_bwrap
def test_a_hostile_kernel_scores_only_the_answer_distlab_computed(hostile_run):
    """02: lesson 1 checked as the grader checks it: q2 (distlab's formula on q2's parameters, legitimate) is the one
    correct answer; every lying object and the kernel's own "every check correct" patch score nothing."""
    answers, problems = hostile_run
    assert answers is not None, problems
    assert not [p for p in problems if "raised" in p or "failed" in p], problems
    grades = check_answers(lesson_variant("memory_wall", None), answers)
    assert [g.question for g in grades if g.status == CORRECT] == ["q2"], [(g.question, g.message) for g in grades]
    assert sum(g.points for g in grades) == 1.0
    assert all(_plain(v) for v in answers.values()), answers


@needs_bwrap
def test_a_hostile_kernel_finds_no_answer_key_and_writes_no_import_hook(hostile_run):
    """02: nothing of the key in any file the kernel imports from or can list under /opt, /run and /tmp, none of the
    real questions among its objects, no secret in its environment or process 1's; no hook or bytecode written
    anywhere but its private /tmp, and none of them on the host."""
    answers, problems = hostile_run
    probe = json.loads(answers["answer_x"])
    assert probe["read"] >= 15, probe  # every lesson's stub was read (and its bytecode)
    assert probe["key"] == [] and probe["objects"] == [] and probe["env"] == [], probe
    assert probe["written"] == [], probe["written"]  # every folder on sys.path and the view: read-only
    import site

    planted = [Path(p, "zz_rt30.pth") for p in [*site.getsitepackages(), *sys.path] if p]
    assert not [p for p in planted if p.name == "zz_rt30.pth" and p.exists()], planted


# ---- 03: a pickled reply ------------------------------------------------------------------------------------------


def test_a_pickled_reply_is_never_unpickled_by_the_grader(tmp_path):
    """03: a reply whose content is a pickle that runs a command when loaded: the grader's session (the one every
    kernel message is read with) unpacks JSON only, so it is refused as text, and the command never runs."""
    import pickle

    from distlab.grading.notebook_client import kernel_manager

    marker = tmp_path / "unpickled"

    class Boom:
        def __reduce__(self):
            return (os.mknod, (str(marker),))

    session = kernel_manager(debugger=False).session
    assert (session.packer, session.unpacker) == ("json", "json")
    with pytest.raises(ValueError):
        session.unpack(pickle.dumps(Boom()))
    assert not marker.exists()
