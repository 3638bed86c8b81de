"""The suite runs on every core (pytest-xdist, addopts -n auto): the repository's conftest.py, copied beside a tiny
suite in a temporary folder, run with two workers. A notebook's cells run in one worker, in order (nbval's kernel is
per file); a module with a module-scoped fixture runs in one worker (the fixture is built once); with
DISTLAB_REQUIRE_ALL_TESTS=1 a skip, at collection or in a test, still fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # each test runs pytest with two workers (and one a kernel)

SHARED = """
import os, pytest

@pytest.fixture(scope="module")
def built():
    # counts how often the module's fixture is built, across workers
    with open(os.environ["BUILT_MARKER"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
    return 1
"""


def _suite(tmp_path: Path, files: dict[str, str]) -> Path:
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def _pytest(folder: Path, *args: str, require_all: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DISTLAB_REQUIRE_ALL_TESTS"}
    env["BUILT_MARKER"] = str(folder / "built")
    # only the plugins under test load (xdist here, nbval where a caller passes -p nbval): the environment's others
    # (hypothesis, anyio, ...) play no part in conftest.py's scheduling or skip rule, and loading them in the
    # controller and both workers took most of each run's seconds
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if require_all:
        env["DISTLAB_REQUIRE_ALL_TESTS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist", "-p", "no:cacheprovider", "-n", "2", "-v", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_notebooks_cells_run_in_one_worker_in_order(tmp_path):
    # each cell reads the name the cell before it defined: run on two workers, a cell without its predecessor
    # raises NameError (109 cells failed so in the suite before the cells were kept together)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("x0 = 0")]
    nb.cells += [nbformat.v4.new_code_cell(f"x{i} = x{i - 1} + 1") for i in range(1, 12)]
    nb.cells += [nbformat.v4.new_code_cell("x11", execution_count=13)]
    nb.cells[-1].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "11"}, execution_count=13)]
    nbformat.write(nb, tmp_path / "chain.ipynb")
    # plain tests beside it, so that both workers have work
    plain = "".join(f"def test_{i}():\n    pass\n\n" for i in range(20))
    folder = _suite(tmp_path, {"test_plain.py": plain})
    proc = _pytest(folder, "-p", "nbval", "--nbval", "--nbval-current-env", "chain.ipynb", "test_plain.py")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "33 passed" in proc.stdout
    # (xdist's verbose lines name a cell "chain::ipynb::Cell 3")
    cells = [line.split()[0] for line in proc.stdout.splitlines() if "::Cell " in line and "PASSED" in line]
    assert len(cells) == 13 and len(set(cells)) == 1, cells


def test_a_module_sharing_a_fixture_runs_in_one_worker_and_builds_it_once(tmp_path):
    tests = SHARED + "".join(f"def test_{i}(built):\n    assert built == 1\n\n" for i in range(12))
    plain = "".join(f"def test_{i}():\n    pass\n\n" for i in range(12))
    folder = _suite(tmp_path, {"test_shared.py": tests, "test_plain.py": plain})
    proc = _pytest(folder)
    assert proc.returncode == 0 and "24 passed" in proc.stdout, proc.stdout[-3000:]
    built = (tmp_path / "built").read_text().split()
    assert len(built) == 1, built  # one build: every test of the module ran in one worker
    # and the plain tests were spread: both workers ran some
    workers = {line.split()[0] for line in proc.stdout.splitlines() if "PASSED" in line}
    assert workers == {"[gw0]", "[gw1]"}, workers


@pytest.mark.parametrize("where", ["collection", "test"])
def test_a_skip_fails_the_run_where_every_test_must_run(tmp_path, where):
    skipping = (
        'import pytest\npytest.importorskip("no_such_module_here")\n\ndef test_x():\n    pass\n'
        if where == "collection"
        else 'import pytest\n\ndef test_x():\n    pytest.skip("not here")\n'
    )
    plain = "".join(f"def test_{i}():\n    pass\n\n" for i in range(6))
    folder = _suite(tmp_path, {"test_skipping.py": skipping, "test_plain.py": plain})
    proc = _pytest(folder, require_all=True)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "DISTLAB_REQUIRE_ALL_TESTS=1: 1 test(s) skipped, so this run fails" in proc.stdout
    # without the variable the same run passes, the skip reported as one
    proc = _pytest(folder)
    assert proc.returncode == 0 and "1 skipped" in proc.stdout, proc.stdout[-3000:]


def test_the_costliest_work_units_are_handed_out_first():
    # collection order puts the fast single tests of tests/cli before the widget fuzzing (SLOW_PATHS) and the
    # linters; xdist's own order (most tests first) would leave every single test, slow ones included, to the end
    # of the run, so a 30 s fuzz test could end it with one worker busy alone. Costs (conftest.SLOW_TEST_COST = 16
    # per slow test): the notebook 3 x 16 = 48, the grading module 2 x 16 = 32, the fast module 20, each slow
    # single 16, each fast single 1
    import importlib.util

    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    queue = {
        "tests/cli/test_cli.py::test_a": ["tests/cli/test_cli.py::test_a"],
        "tests/core/test_many.py": [f"tests/core/test_many.py::test_{i}" for i in range(20)],
        "tests/grading/test_grade.py": ["tests/grading/test_grade.py::test_a", "tests/grading/test_grade.py::test_b"],
        "tests/test_lint.py::test_mypy_finds_nothing": ["tests/test_lint.py::test_mypy_finds_nothing"],
        "tests/widgets/test_widget_fuzz.py::test_x[A]": ["tests/widgets/test_widget_fuzz.py::test_x[A]"],
        "tests/widgets/test_units.py::test_b": ["tests/widgets/test_units.py::test_b"],
        "notebooks/01_memory_wall.ipynb": [f"notebooks/01_memory_wall.ipynb::Cell {i}" for i in range(3)],
    }
    assert list(root_conftest._slowest_first(queue)) == [
        "notebooks/01_memory_wall.ipynb",
        "tests/grading/test_grade.py",
        "tests/core/test_many.py",
        "tests/test_lint.py::test_mypy_finds_nothing",
        "tests/widgets/test_widget_fuzz.py::test_x[A]",
        "tests/cli/test_cli.py::test_a",
        "tests/widgets/test_units.py::test_b",
    ]


def test_auto_starts_one_worker_more_than_cores_except_for_the_fast_tier(pytestconfig, monkeypatch):
    # -n auto asks this hook (the repository's conftest.py first, xdist's own after it): xdist's count (one worker
    # per core) + conftest.EXTRA_WORKERS = 1, so a test that waits (a time limit, a kernel's start, a page) leaves
    # its core to the extra worker; the fast tier computes throughout and keeps xdist's count; a count given in
    # $PYTEST_XDIST_AUTO_NUM_WORKERS is obeyed
    from xdist.plugin import pytest_xdist_auto_num_workers as per_core

    hook = pytestconfig.hook.pytest_xdist_auto_num_workers
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(pytestconfig.option, "markexpr", "")
    cores = per_core(pytestconfig)
    assert hook(config=pytestconfig) == cores + 1
    monkeypatch.setattr(pytestconfig.option, "markexpr", "not slow")
    assert hook(config=pytestconfig) == cores
    monkeypatch.setattr(pytestconfig.option, "markexpr", "")
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert hook(config=pytestconfig) == 5
