"""The kernel-side code (distlab.grading.kernel_side) is what the kernel runs: its hook reads no globals and
has no closures, and the collector's output reads back through answers.parse_answers."""

from __future__ import annotations

import contextlib
import dis
import io
import types
from pathlib import Path

import numpy as np

from distlab.grading import answers, kernel, kernel_side
from distlab.units import Q_


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _functions(source):
    """{name: code object} of the functions `source` defines at its top level."""
    top = compile(source, "<sandbox>", "exec")
    return {c.co_name: c for c in top.co_consts if isinstance(c, types.CodeType)}


def _loaded_globals(code):
    return {
        i.argval
        for c in _code_objects(code)
        for i in dis.get_instructions(c)
        if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }


def test_sandbox_hook_reads_no_globals_and_has_no_closures():
    # Student code can rebind module globals and builtins (and cell contents); the hook and
    # its helpers must use only what they bound as default arguments when they were defined.
    inner = [
        c
        for step in _functions(kernel.SANDBOX_SOURCE).values()
        for c in step.co_consts
        if isinstance(c, types.CodeType)
        and c.co_name in ("resolve", "inside", "is_dir_outside", "relative_up", "secret", "hook")
    ]
    assert sorted(c.co_name for c in inner) == ["hook", "inside", "is_dir_outside", "relative_up", "resolve", "secret"]
    for fn in inner:
        for code in _code_objects(fn):
            assert not code.co_freevars, (code.co_name, code.co_freevars)
            ops = {i.opname for i in dis.get_instructions(code)}
            assert not ops & {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"}, (code.co_name, ops)


def test_the_kernel_gets_every_step_install_sandbox_calls():
    # install_sandbox runs its steps by name in the kernel's private namespace: each must be in the source sent,
    # and the steps themselves call nothing but builtins (the namespace holds nothing else)
    import builtins

    steps = _functions(kernel.SANDBOX_SOURCE)
    assert set(steps) == {f.__name__ for f in kernel_side.SANDBOX}
    assert _loaded_globals(steps["install_sandbox"]) - set(dir(builtins)) == set(steps) - {"install_sandbox"}
    for name, code in steps.items():
        if name != "install_sandbox":
            assert _loaded_globals(code) <= set(dir(builtins)), (name, _loaded_globals(code) - set(dir(builtins)))


def test_the_kernel_gets_the_source_of_the_real_functions():
    assert kernel.SANDBOX_SOURCE.startswith("def install_sandbox(")
    assert kernel.COLLECT_SOURCE.startswith("def collect_answers(")
    sandbox = {f.__name__ for f in kernel_side.SANDBOX}
    for source, names in ((kernel.SANDBOX_SOURCE, sandbox), (kernel.COLLECT_SOURCE, {"collect_answers"})):
        namespace = {}
        exec(compile(source, "<kernel>", "exec"), namespace)  # defines the functions, runs nothing
        assert set(namespace) - {"__builtins__"} == names
    assert "'install_sandbox'" in kernel.sandbox_cell(Path("/w"), "n", None, None)
    assert "'collect_answers'" in kernel.collect_cell("n", ["answer_q1"])


def test_collected_answers_read_back():
    ns = {
        "answer_q1": np.int64(16),
        "answer_q2": Q_(112e9, "B"),
        "answer_q3": [1, (2.5, {"a": None})],
        "answer_q4": "x" * 50,
        "answer_q6": "x" * 10,
        "other": 1,
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        kernel_side.collect_answers(
            ns, "nonce", ["answer_q1", "answer_q2", "answer_q3", "answer_q4", "answer_q5", "answer_q6"], 10, 10_000
        )
    got = answers.parse_answers(out.getvalue(), "nonce")
    # a string longer than max_chars is not cut (its first 10 characters are another answer): it is "too large"
    assert isinstance(got.pop("answer_q4"), answers.OpaqueAnswer)
    assert got == {
        "answer_q1": 16,
        "answer_q2": "112000000000.0 byte",
        "answer_q3": [1, (2.5, {"a": None})],
        "answer_q6": "x" * 10,
    }
