"""Repository-wide pytest hooks: lessons that need PyTorch skip cleanly, with the reason, without it;
where every test must run (CI sets DISTLAB_REQUIRE_ALL_TESTS=1), a skipped test fails the run; and under
pytest-xdist (addopts runs `-n auto --dist loadgroup`) the tests that must share one process stay in one worker.

(tests/conftest.py holds the test settings; this file sits at the root because nbval collects
notebooks/ too, which tests/conftest.py does not reach.)
"""

from __future__ import annotations

import os

import pytest

#: .ci/run sets this: CI installs torch, chromium and bubblewrap, so a test that skips there is a check
#: that silently did not run (a missing install, a broken sandbox), and the run must fail
REQUIRE_ALL_TESTS = os.environ.get("DISTLAB_REQUIRE_ALL_TESTS") == "1"

#: Notebooks whose cells import torch (through distlab.verify).
TORCH_NOTEBOOKS = {"09_verify_with_pytorch.ipynb"}


def _worker_group(item) -> str | None:
    """The xdist group an item must share a worker with, or None (any worker will do).

    A notebook's cells share one kernel (nbval starts it for the file): all of them run in one worker, in order.
    Tests that use a module-scoped fixture (a JupyterLab or Voila server, a PyTorch run) go with the rest of their
    module, so the fixture is built once, not once per worker.
    """
    module = item.nodeid.split("::")[0]  # the file, relative to the root (solutions/ and notebooks/ share names)
    if item.path.suffix == ".ipynb":
        return module
    fixtures = getattr(item, "_fixtureinfo", None)
    if fixtures is not None:
        for defs in fixtures.name2fixturedefs.values():
            if defs and defs[-1].scope == "module":
                return module
    return None


# tryfirst: xdist reads the groups in its own collection hook, which would otherwise run before this one
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = _worker_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))

    from distlab.verify import TORCH_MESSAGE, torch_available

    if torch_available():  # imports torch: a broken install skips too, with the reason
        return

    skip = pytest.mark.skip(reason=TORCH_MESSAGE)
    for item in items:
        if item.path.name in TORCH_NOTEBOOKS:
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
        terminalreporter.write_line(f"DISTLAB_REQUIRE_ALL_TESTS=1: {len(skipped)} test(s) skipped, so this run "
                                    "fails (the short test summary gives their reasons)", red=True, bold=True)
