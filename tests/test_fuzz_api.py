"""Hostile-input fuzzing of the declared public API and of every CLI subcommand (issue 19).

Every public function listed in the `__all__` of a formula module, and every `distlab` subcommand, gets
plausible arguments with one or two hostile ones mixed in (0, negatives, 1e308, 1e-308, NaN, infinities,
10**400, 2**62, booleans, None, wrong strings, empty lists and dicts, numpy arrays, complex numbers, bytes).
The contract (distlab.errors, DESIGN.md "Errors"): the call returns a result with no NaN or infinity in it,
or raises a DistlabError with a message; never another exception, never a hang (each call gets a few
seconds), never a MemoryError or OverflowError. The CLI prints no traceback, no 'nan' or 'inf', and exits 0 or 2.

The examples are derandomized (the same inputs every run) and few per function, so the file runs in CI in
about two minutes. Run `python tests/test_fuzz_api.py [N]` for a wider random sweep that lists every failure.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import math
import numbers
import re
import resource
import signal
import sys
import warnings

import numpy as np
import pint
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import cli, validation
from distlab.errors import DistlabError

#: The formula layer: the modules whose functions a user calls with numbers (DESIGN.md "Package layers").
FORMULA_MODULES = (
    "units",
    "hardware",
    "models",
    "memory",
    "flops",
    "collectives",
    "dataparallel",
    "pipeline",
    "tensor",
    "efficiency",
    "memory_recipes",
    "mesh",
    "moe.activations",
    "moe.catalog",
    "moe.capacity",
    "moe.all_to_all",
    "moe.cost",
    "moe.export",
    "moe.routing",
    "moe.step",
    "training",
    "triage",
    "planner",
    "validation",
    "production",
    "export",
    "fsdp",
    "failures",
    "batch",
    "tp_overlap",
    "partial_recompute",
    "expert_gemms",
)
#: Seconds a single call may take before it counts as a hang.
CALL_LIMIT_S = 5
#: Hostile examples per function and per subcommand (derandomized).
EXAMPLES = 25


def public_functions() -> dict[str, object]:
    """'module.name' -> function, for every function in a formula module's __all__ (each function once)."""
    found, seen = {}, set()
    for module_name in FORMULA_MODULES:
        module = importlib.import_module(f"distlab.{module_name}")
        for name in module.__all__:
            value = getattr(module, name)
            # a function without parameters receives no hostile input; calibration.fit_calibration (a grid search
            # of seconds) is one, tested by tests/core/test_efficiency.py
            if inspect.isfunction(value) and id(value) not in seen and inspect.signature(value).parameters:
                seen.add(id(value))
                found[f"{module_name}.{name}"] = value
    return found


# ----------------------------------------------------------------------------------------------- values

HOSTILE = (
    0,
    -1,
    0.5,
    1e308,
    -1e308,
    1e-308,
    float("nan"),
    float("inf"),
    float("-inf"),
    10**400,
    -(10**400),
    2**31,
    2**62,
    True,
    None,
    "",
    "nope-name",
    "5 seconds",
    "80 GB",
    "900 GB/s",
    "nan",
    "1e999",
    "2**10",
    [],
    [1, 2],
    {},
    np.array([]),
    np.array([1.0, 2.0]),
    np.float64("nan"),
    1 + 2j,
    b"8",
)


def _plausible_table():
    import distlab.moe.step  # noqa: F401  (moe.step)
    from distlab import hardware, memory, memory_recipes, models, moe, pipeline, training

    model = models.model("llama2-7b")
    moe_model = moe.model("qwen3-235b-a22b")
    moe_view = moe.step.step_model("mixtral-8x7b", 4096, imbalance=1.5)
    moe_config = moe.moe_config("deepseek-v3", 2048, pp=16, ep=64, global_batch=15360, max_nodes=4)
    cluster = hardware.cluster("dgx-h100", 2)
    estimate = training.estimate("llama2-7b", cluster, global_batch=64, tp=2, pp=2, seq_len=2048)
    small = (1, 2, 4, 8)
    return {
        "model": ("llama2-7b", "gpt3-175b", model, "mixtral-8x7b", "deepseek-v3", moe_model, moe_view),
        "cl": (cluster,),
        "cluster": ("dgx-h100", cluster),
        "estimate": (estimate,),
        "gpu": ("h100-sxm", "a100-80gb"),
        "node": ("dgx-h100",),
        "fabric": ("ib-ndr", None),
        "link": ("nvlink4", "ib-ndr"),
        "inter_link": ("ib-ndr",),
        "gpus": (8, 16, 64),
        "gpus_per_node": (8, 4),
        "nodes": (1, 2),
        "n": (2, 8, 64),
        "dps": ((1, 2, 4),),
        "tp": small,
        "pp": small,
        "dp": small,
        "cp": (1, 2),
        "ep": (1, 2),
        "chunks": (1, 2),
        "microbatches": (1, 4, 8),
        "micro_batch_size": (1, 2),
        "global_batch": (64, 512),
        "batch": (1, 8),
        "seq_len": (2048, 4096),
        "hidden": (4096, 1024),
        "layers": (32, 8),
        "vocab": (32000,),
        "tokens": (4096, 2048),
        "ffn": (32, 64),
        "zero": (0, 1, 2, 3),
        "recompute": ("none", "selective", "full"),
        "precision": ("mixed", "fp8", "bf16"),
        "schedule": ("1f1b", "gpipe", "interleaved", "zb-h1"),
        "op": ("all-reduce", "all-gather"),
        "algorithm": (None, "ring", "tree", "hierarchical"),
        "size": ("1 GB", 1e9, "64 MB"),
        "size_bytes": (1e9,),
        "n_bytes": (1e9, 80e9),
        "grad_bytes": (14e9,),
        "bucket_bytes": (25e6,),
        "bucket_size": ("25 MB",),
        "capacity": ("80 GB", 80e9),
        "params": (7e9, "llama2-7b"),
        "bandwidth": ("450 GB/s", 4.5e11),
        "intra_bw": (4.5e11,),
        "inter_bw": (5e10,),
        "hbm_bandwidth": (3.35e12,),
        "latency": ("5 us", 5e-6),
        "intra_lat": (3e-6,),
        "inter_lat": (5e-6,),
        "peak_flops": (989e12,),
        "efficiency": (0.5, 0.8),
        "value": (1.0, "80 GB", 8),
        "values": ((1.0, 2.0),),
        "unit": ("B", "s", "B/s"),
        "name": ("x",),
        "text": ("900 GB/s", "--tensor-model-parallel-size 2"),
        "seconds": (0.0025,),
        "time": (1.0,),
        "step_time": (10.0,),
        "sigma": (0.05,),
        "steps": (100,),
        "kind": ("gpipe", "1f1b"),
        "order": ("tp-cp-ep-dp-pp",),
        "element_bytes": (2,),
        "digits": (3,),
        "attention_width": (4096,),
        "w": (1.0,),
        "x": (1.0,),
        "role": ("all", "validation"),
        "run_": ("megatron-gpt3-175b",),
        "run_id": ("megatron-gpt3-175b",),
        "mode": ("none",),
        "split": ("column", "row"),
        "fmt": ("megatron", "deepspeed"),
        "config": ({}, moe_config),
        "orders": (pipeline.gpipe_order(2, 2), [[("F", 0), ("B", 0)], [("F", 0), ("B", 0)]]),
        "fixes": ([],),
        "recipe": (memory.precision_recipe("mixed"),),
        "recompute_code": (0, 1, 2),
        "schedule_code": (0, 1, 2),
        # distlab.moe
        "experts": (8, 256),
        "top_k": (2, 8),
        "capacity_factor": (1.25, 1.0),
        "loads": ([1500, 900, 700, 1000], np.array([3.0, 1.0])),
        "max_nodes": (4, 2),
        "imbalance": (1.0, 1.5),
        "load_factor": (1.0, 1.5),
        "etp": (1, 2),
        "accelerator": ("h100-sxm", "a100-80gb", "mi300x"),
        "m": (4096, 1024),
        "k": (4096, 512),
        "sms": (132, 108, None),
        "ridge": (237.0, 133.0),
        "ep_per_node": (8, 4),
        "micro_batch": (1, 2),
        "intra_bytes": (58.7e6,),
        "inter_bytes": (1e6, 0),
        "scores": (256, 64),
        "seed": (0, 1),
        "skew": (0.0, 1.0),
        "tokens_per_gpu": (256, 64),
        "sequence_parallel": (True, False),
        "memory_recipe": (None, memory_recipes.memory_recipe("megatron")),
        "dpc": (8, np.array([8.0, 16.0])),
        "first_layers": (4, 61),
        "moe_config": (moe_config,),
        "partial_recompute": (True, False),
    }


_TABLE = None


def plausible(name: str, default):
    global _TABLE
    if _TABLE is None:
        _TABLE = _plausible_table()
    options = list(_TABLE.get(name, ()))
    if default is not inspect.Parameter.empty:
        options.append(default)
    return options or [1, 2, 8]


def value_strategy(name: str, default):
    """A plausible value for a parameter of this name (mostly) or a hostile one."""
    return st.one_of(
        st.sampled_from(plausible(name, default)),
        st.sampled_from(plausible(name, default)),
        st.sampled_from(HOSTILE),
    )


# ------------------------------------------------------------------------------------------ the contract


class CallTimedOut(BaseException):
    """A call ran past CALL_LIMIT_S (BaseException: `except Exception` in the library cannot swallow it)."""


@contextlib.contextmanager
def bounded(seconds: int = CALL_LIMIT_S):
    """Interrupt after `seconds` and cap the address space 3 GiB above today's, so a runaway allocation
    fails fast here instead of swapping the machine."""

    def alarm(signum, frame):
        raise CallTimedOut(f"no result after {seconds} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[0])
    cap = pages * resource.getpagesize() + 3 * 2**30
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    previous = signal.signal(signal.SIGALRM, alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


#: Result fields where NaN is a documented marker of "no such event", not an overflow: an FsdpTimeline's backward
#: gathers of a layer that is not resharded (the last one; every one without resharding). Infinity is still refused.
NAN_MARKS = {("FsdpTimeline", "bg_start"), ("FsdpTimeline", "bg_end")}


def non_finite(value, depth: int = 0) -> str | None:
    """Where a NaN or infinity sits in a result (None when there is none)."""
    if depth > 4 or value is None or isinstance(value, (str, bytes, bool)):
        return None
    if isinstance(value, pint.Quantity):
        return non_finite(value.magnitude, depth + 1)
    if isinstance(value, numbers.Number):
        try:
            return None if math.isfinite(complex(value).real) and math.isfinite(complex(value).imag) else repr(value)
        except (OverflowError, TypeError):
            return None  # a huge Python int is a finite number
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and value.size and not np.all(np.isfinite(value)):
            return f"array with {int(np.sum(~np.isfinite(value)))} non-finite entries"
        return None
    if isinstance(value, dict):
        items = list(value.items())[:50]
        for key, item in items:
            where = non_finite(item, depth + 1)
            if where:
                return f"[{key!r}] {where}"
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value[:50]):
            where = non_finite(item, depth + 1)
            if where:
                return f"[{index}] {where}"
        return None
    fields = getattr(value, "__dataclass_fields__", None)
    if fields:
        for field in fields:
            item = getattr(value, field, None)
            if (type(value).__name__, field) in NAN_MARKS:
                item = np.nan_to_num(np.asarray(item, dtype=float), nan=0.0, posinf=np.inf, neginf=-np.inf)
            where = non_finite(item, depth + 1)
            if where:
                return f".{field} {where}"
    return None


def _escaped(caught) -> str | None:
    """The first warning a student would see printed above our answer or error (NumPy's overflow RuntimeWarning,
    a UserWarning); deprecations inside libraries are not the student's."""
    for w in caught:
        if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
            return f"a {w.category.__name__} escaped ({str(w.message)[:120]})"
    return None


def check_call(func, kwargs: dict) -> str | None:
    """Call func(**kwargs); a description of the broken contract, or None when it held (a result with no NaN or
    infinity, or our error; and no warning printed on the way: a student sees our message only)."""
    try:
        with bounded(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = func(**kwargs)
    except DistlabError as exc:
        return _escaped(caught) or (None if str(exc).strip() else f"{type(exc).__name__} with an empty message")
    except CallTimedOut as exc:
        return f"hang: {exc}"
    except BaseException as exc:  # noqa: BLE001 - anything else breaks the contract
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    escaped = _escaped(caught)
    if escaped:
        return escaped
    where = non_finite(result)
    return f"returned a non-finite number: {where}" if where else None


def test_no_warning_reaches_the_student_before_our_error():
    # the two calls of issue 31: NumPy's overflow RuntimeWarning was printed above our error
    from distlab import collectives, memory

    assert check_call(memory.training_memory, dict(model=1e308, dp=3)) is None
    assert check_call(collectives.collective_cost, dict(op="all-reduce", size=1e9, gpus=8, bandwidth=1e-308)) is None
    # the check itself sees a warning
    assert "RuntimeWarning" in check_call(lambda: np.float64(1e308) * 10, {})


def describe(name: str, kwargs: dict) -> str:
    shown = ", ".join(f"{k}={v!r}"[:80] for k, v in kwargs.items())
    return f"{name}({shown})"


def draw_kwargs(func, draw) -> dict:
    kwargs = {}
    for parameter in inspect.signature(func).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        required = parameter.default is inspect.Parameter.empty
        if required or draw(st.booleans()):
            kwargs[parameter.name] = draw(value_strategy(parameter.name, parameter.default))
    return kwargs


FUNCTIONS = public_functions()
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_function_gives_a_result_or_our_error(name):
    func = FUNCTIONS[name]

    @FUZZ_SETTINGS
    @given(st.data())
    def fuzz(data):
        kwargs = draw_kwargs(func, data.draw)
        problem = check_call(func, kwargs)
        assert problem is None, f"{describe(name, kwargs)}: {problem}"

    fuzz()


@pytest.mark.parametrize(
    "value", [v for v in HOSTILE if not (isinstance(v, (bool, int)) and not isinstance(v, float) and v in (0, 1))]
)
def test_plans_partial_recompute_refuses_anything_but_true_or_false(value):
    """plan(partial_recompute=...) takes True or False (1 or 0); every other hostile value is our error naming it."""
    from distlab import planner
    from distlab.errors import ConfigurationError

    with bounded(), pytest.raises(ConfigurationError, match="partial_recompute"):
        planner.plan("llama2-7b", "dgx-h100", nodes=1, global_batch=8, partial_recompute=value)


def test_every_public_module_declares_its_api():
    """Every public module of distlab/ (no '_' in its dotted name) has an __all__ of names it defines."""
    import pkgutil

    import distlab

    missing, unknown = [], []
    for info in pkgutil.walk_packages(distlab.__path__, "distlab."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        if info.name.startswith("distlab.verify.") or info.name.startswith("distlab.course."):
            continue  # verify's submodules import torch; course/ holds deprecated aliases of lessons/
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module(info.name)
        if module.__name__ != info.name:
            continue  # a deprecated alias: the old name is the new module
        if "__all__" not in vars(module):
            missing.append(info.name)
            continue
        unknown += [f"{info.name}.{n}" for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"public modules without __all__: {missing}"
    assert not unknown, f"names in __all__ that do not exist: {unknown}"


# -------------------------------------------------------------------------------------------------- CLI

HOSTILE_TEXT = (
    "0",
    "1e308",
    "1e-308",
    "1e400",
    "nan",
    "inf",
    "2147483648",
    "99999999999999999999",
    "abc",
    "5 seconds",
    "80 GB",
    "900 GB/s",
    "",
    "2**10",
    "7B",
    "８",
    "%s%n",
    "1e1 " * 24 + "!",
)

PLAUSIBLE_TEXT = {
    "op": ("all-reduce", "all-gather", "reduce-scatter"),
    "size": ("1 GB", "64 MB"),
    "gpus": ("8", "64"),
    "link": ("nvlink4", "ib-ndr"),
    "bandwidth": ("450 GB/s",),
    "latency": ("5 us",),
    "algorithm": ("ring", "tree"),
    "model": ("llama2-7b", "gpt3-175b"),
    "node": ("dgx-h100",),
    "fabric": ("ib-ndr",),
    "global_batch": ("512", "64"),
    "seq": ("2048",),
    "precision": ("mixed", "fp8"),
    "format": ("megatron", "deepspeed", "torchtitan"),
    "params": ("7e9", "7B"),
    "zero": ("0", "3"),
    "dp": ("2",),
    "tp": ("2", "8"),
    "pp": ("2", "4"),
    "cp": ("1", "2"),
    "ep": ("1",),
    "gpus_per_node": ("8",),
    "order": ("tp-cp-ep-dp-pp",),
    "rank": ("0", "5"),
    "max_groups": ("4",),
    "kind": ("1f1b", "gpipe", "interleaved", "zb-h1"),
    "stages": ("4",),
    "microbatches": ("8",),
    "chunks": ("2",),
    "ratio": ("2",),
    "forward": ("1",),
    "p2p": ("0",),
    "efficiency": ("0.5",),
    "role": ("all", "validation"),
    "micro_batch_size": ("1",),
    "recompute": ("selective",),
    "schedule": ("1f1b",),
    "top": ("3",),
}
#: Subcommands that run notebooks or write files: fuzzed on their numeric options only, in a scratch folder.
SLOW_OR_WRITING = {"grade", "exercises", "gradescope-autograder"}


def subcommands() -> dict:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(action.choices)


def run_cli(argv: list[str]) -> tuple[int, str]:
    """(exit status, stdout + stderr) of `distlab ARGV` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue() + err.getvalue()


def cli_options(command: str):
    """(option string, dest, takes a value, required) of each optional argument of a subcommand."""
    parser = subcommands()[command]
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        yield action.option_strings[-1], action.dest, action.nargs != 0, action.required, action.choices


NON_FINITE_WORD = re.compile(r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w])", re.IGNORECASE)


def check_cli(argv: list[str]) -> str | None:
    try:
        with bounded(20):
            status, output = run_cli(argv)
    except CallTimedOut as exc:
        return f"hang: {exc}"
    except BaseException as exc:  # noqa: BLE001
        return f"traceback: {type(exc).__name__}: {str(exc)[:200]}"
    if status not in (0, 2):
        return f"exit status {status}"
    hostile_words = {a.lower() for a in argv}
    shown = [m.group(0) for m in NON_FINITE_WORD.finditer(output)]
    if status == 0 and shown and not all(s.lower() in hostile_words for s in shown):
        return f"printed {shown[:3]}"
    if "Traceback" in output:
        return "printed a traceback"
    if "Warning" in output:
        return "printed a Python warning"
    return None


CLI_COMMANDS = sorted(c for c in subcommands() if c not in SLOW_OR_WRITING)


@pytest.mark.parametrize("command", CLI_COMMANDS)
def test_cli_subcommand_gives_output_or_one_error_line(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # `validate --plot FILE` writes FILE
    if command == "validate":  # its 50 examples fuzz the options; each priced the same 60 runs again (0.3 s; 13 s CPU)
        monkeypatch.setattr(validation, "compare", functools.cache(validation.compare))
    options = list(cli_options(command))

    @settings(FUZZ_SETTINGS, max_examples=2 * EXAMPLES)
    @given(st.data())
    def fuzz(data):
        argv = [command]
        for flag, dest, takes_value, required, choices in options:
            if not (required or data.draw(st.booleans())):
                continue
            if not takes_value:
                argv.append(flag)
                continue
            pool = list(choices or PLAUSIBLE_TEXT.get(dest, ("1", "2")))
            argv += [
                flag,
                data.draw(st.one_of(st.sampled_from(pool), st.sampled_from(pool), st.sampled_from(HOSTILE_TEXT))),
            ]
        problem = check_cli(argv)
        assert problem is None, f"distlab {' '.join(argv)}: {problem}"

    fuzz()


#: The outside review's reproducers (shared/reviews/reliability-findings.md, bugs 4, 12, 13 and 15).
REVIEW_CASES = [
    ["mesh", "--gpus", "64", "--tp", "8", "--pp", "2", "--gpus-per-node", "2147483648"],
    ["schedule", "--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--forward", "1e308"],
    ["schedule", "--stages", "100000", "--microbatches", "100000"],
    ["collective", "--size", "1 GB", "--gpus", "8", "--link", "nvlink4", "--bandwidth", "1e-308"],
    ["collective", "--size", "1e1 " * 24 + "!", "--gpus", "8", "--link", "nvlink4"],
]


@pytest.mark.parametrize("argv", REVIEW_CASES, ids=lambda argv: " ".join(argv)[:50])
def test_cli_review_reproducers_end_in_one_error_line(argv):
    problem = check_cli(argv)
    assert problem is None, f"distlab {' '.join(argv)}: {problem}"


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e400", "abc"])
def test_grade_refuses_a_time_limit_that_is_not_a_positive_finite_number(tmp_path, value):
    status, output = run_cli(
        ["grade", str(tmp_path / "missing.ipynb"), "--lesson", "memory_wall", f"--timeout={value}"]
    )
    assert status == 2 and "timeout" in output and "Traceback" not in output


def test_a_misspelt_subcommand_suggests_the_closest():
    status, output = run_cli(["colective", "--size", "1 GB"])
    assert status == 2
    assert "collective" in output and "did you mean" in output.lower()


# ----------------------------------------------------------------------------------- wide random sweep


def sweep(calls_per_function: int = 60, seed: int = 0) -> int:
    """Call every public function with random plausible/hostile arguments; print each broken contract."""
    import random

    rng = random.Random(seed)
    failures = 0
    for name, func in sorted(FUNCTIONS.items()):
        seen = set()
        for _ in range(calls_per_function):
            kwargs = draw_kwargs(func, lambda strategy: _draw(strategy, rng))
            problem = check_call(func, kwargs)
            if problem:
                key = problem.split(":")[0] + problem[:60]
                if key not in seen:
                    seen.add(key)
                    failures += 1
                    print(f"{describe(name, kwargs)}\n    -> {problem}", flush=True)
    return failures


def _draw(strategy, rng):
    """A random pick from the strategies built above (booleans, or one_of of sampled_from)."""
    if repr(strategy) == "booleans()":
        return rng.random() < 0.5
    branches = strategy.original_strategies if hasattr(strategy, "original_strategies") else [strategy]
    branch = rng.choice(list(branches))
    return rng.choice(list(branch.elements))


if __name__ == "__main__":
    count = sweep(int(sys.argv[1]) if len(sys.argv) > 1 else 60, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(f"{count} distinct failures")
