"""Repository-wide pytest hooks: lessons that need PyTorch skip cleanly, with the reason, without it;
where every test must run (CI sets DISTLAB_REQUIRE_ALL_TESTS=1), a skipped test fails the run (under pytest-xdist
too: the workers' reports, skips at collection included, reach this process's terminal reporter).

(tests/conftest.py holds the test settings; this file sits at the root because nbval collects
notebooks/ too, which tests/conftest.py does not reach.)
"""

import functools
import os
from collections import OrderedDict
from pathlib import Path

import pytest

# (each test process does without jsonschema's slow optional import: distlab/_pytest_early.py, loaded by addopts'
# `-p` before nbval's plugin imports nbformat, which is before this file runs)

#: .ci/run sets this: CI installs torch, chromium and bubblewrap, so a test that skips there is a check
#: that silently did not run (a missing install, a broken sandbox), and the run must fail
REQUIRE_ALL_TESTS = os.environ.get("DISTLAB_REQUIRE_ALL_TESTS") == "1"

#: Outside the fast tier (`pytest -m "not slow" tests`, README's For contributors), besides every notebook and every
#: test marked `notebook` or `browser`: the grading sandboxes (each test starts kernels), the browser and Voila
#: tests, PyTorch's multi-process runs, the linters (mypy alone takes a minute or two), the fuzzing of every app and
#: CLI subcommand, the frame-by-frame redraw checks, the instructor pack's build and the install checks.
SLOW_PATHS = (
    "tests/grading/",
    "tests/test_browser.py",
    "tests/test_lint.py",
    "tests/test_fuzz_api.py",
    "tests/test_instructor_pack.py",
    "tests/test_binder.py",
    "tests/test_first_run.py",
    "tests/widgets/test_widget_fuzz.py",
    "tests/widgets/test_widget_frames.py",
    "tests/core/test_verify_torch.py",
    "tests/core/test_verify_sharding_torch.py",
    "tests/core/test_verify_all_to_all.py",
    "tests/core/test_verify_forked.py",
    "tests/core/test_verify_moe_torch.py",
)

#: Notebooks whose cells import torch (through distlab.verify).
TORCH_NOTEBOOKS = {"09_verify_with_pytorch.ipynb"}


@functools.cache
def _shares_module_fixtures(path: Path) -> bool:
    """Whether a test module defines a module- or class-scoped fixture (a JupyterLab server, a PyTorch run)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return any(f"scope={q}{s}{q}" in text for q in "\"'" for s in ("module", "class"))


def _work_unit(rootpath: Path, nodeid: str) -> str:
    """What an xdist worker must run as one piece: a notebook's cells (they share the kernel nbval starts for the
    file; run apart, a later cell meets a kernel without the earlier ones' names), a module that shares a fixture
    (run apart, each worker would build it again), else the test alone."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb") or _shares_module_fixtures(rootpath / path):
        return path
    return nodeid


#: A slow test (SLOW_PATHS, a notebook's cell) costs about 16 fast ones: the fast tier's 3,133 tests took 78 s on
#: 2 workers (~0.05 s each), the suite's other 1,246 about 970 worker-seconds (~0.8 s each; benchmarks/RESULTS.md,
#: session 4's clean-clone run). Only the order of the work units uses it.
SLOW_TEST_COST = 16


def _unit_cost(nodeids) -> int:
    """A work unit's estimated cost, in fast tests: each slow test (a notebook's cell, SLOW_PATHS) counts
    SLOW_TEST_COST."""
    return sum(
        SLOW_TEST_COST if n.split("::", 1)[0].endswith(".ipynb") or n.startswith(SLOW_PATHS) else 1 for n in nodeids
    )


def _slowest_first(workqueue: dict) -> dict:
    """The work units (scope -> its node ids), the costliest first (_unit_cost; equal costs keep collection order),
    so that the run ends on short units spread over every worker, not on one worker busy alone."""
    return dict(sorted(workqueue.items(), key=lambda unit: -_unit_cost(unit[1])))


#: Workers `-n auto` starts beyond one per core (pytest_xdist_auto_num_workers)
EXTRA_WORKERS = 1


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: xdist's count (one worker per core) plus EXTRA_WORKERS. Much of a slow test's time is waiting, not
    computing (a notebook's time limit, a kernel's start, a page's render): the extra worker's tests run meanwhile.
    The fast tier (`-m "not slow"`) computes throughout and keeps one per core; $PYTEST_XDIST_AUTO_NUM_WORKERS, where
    set, is obeyed as xdist obeys it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or "not slow" in (config.option.markexpr or ""):
        return None  # xdist's own hook decides
    from xdist.plugin import pytest_xdist_auto_num_workers as per_core

    return per_core(config) + EXTRA_WORKERS


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N` (its --dist load) as xdist's load scheduling, but by the work units of _work_unit, the costliest
    first (_slowest_first: notebooks, the browser tests and the sandboxes, then the fast tests that fill the
    workers' remaining time). (xdist_group marks would say this per test, but pytest-xdist 3.8 writes them into
    item._nodeid, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(config.rootpath, nodeid)

        def _assign_work_unit(self, node) -> None:
            # schedule() fills the queue (by test count), then assigns the first units: order it by cost once
            if not getattr(self, "_ordered", False):
                self.workqueue = OrderedDict(_slowest_first(self.workqueue))
                self._ordered = True
            super()._assign_work_unit(node)

    return WorkUnitScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if (
            item.path.suffix == ".ipynb"
            or item.nodeid.startswith(SLOW_PATHS)
            or item.get_closest_marker("notebook")
            or item.get_closest_marker("browser")
        ):
            item.add_marker(pytest.mark.slow)

    torch_items = [item for item in items if item.path.name in TORCH_NOTEBOOKS]
    if not torch_items:  # nothing to skip: importing torch (seconds per xdist worker) would decide nothing
        return

    from distlab.verify import TORCH_MESSAGE, torch_available

    if torch_available():  # imports torch: a broken install skips too, with the reason
        return

    skip = pytest.mark.skip(reason=TORCH_MESSAGE)
    for item in torch_items:
        item.add_marker(skip)


def _skipped(config) -> list:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    return list(reporter.stats.get("skipped", [])) if reporter is not None else []


def pytest_sessionfinish(session, exitstatus):
    if REQUIRE_ALL_TESTS and _skipped(session.config) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = _skipped(config)
    if REQUIRE_ALL_TESTS and skipped:
        terminalreporter.write_line(
            f"DISTLAB_REQUIRE_ALL_TESTS=1: {len(skipped)} test(s) skipped, so this run "
            "fails (the short test summary gives their reasons)",
            red=True,
            bold=True,
        )
