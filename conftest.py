"""Repository-wide pytest hooks: lessons that need PyTorch skip cleanly, with the reason, without it;
where every test must run (CI sets DISTLAB_REQUIRE_ALL_TESTS=1), a skipped test fails the run (under pytest-xdist
too: the workers' reports, skips at collection included, reach this process's terminal reporter).

(tests/conftest.py holds the test settings; this file sits at the root because nbval collects
notebooks/ too, which tests/conftest.py does not reach.)
"""

import os

import pytest

#: .ci/run sets this: CI installs torch, chromium and bubblewrap, so a test that skips there is a check
#: that silently did not run (a missing install, a broken sandbox), and the run must fail
REQUIRE_ALL_TESTS = os.environ.get("DISTLAB_REQUIRE_ALL_TESTS") == "1"

#: Notebooks whose cells import torch (through distlab.verify).
TORCH_NOTEBOOKS = {"09_verify_with_pytorch.ipynb"}


def pytest_collection_modifyitems(config, items):
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
