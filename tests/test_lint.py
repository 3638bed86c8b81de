"""The linter and the type checker run with the README's test command (CI runs only that): `ruff check distlab
tests`, `ruff format --check distlab tests` and `mypy` (over distlab/) must be clean.

Their settings are in pyproject.toml ([tool.ruff], [tool.mypy]); both come with the [test] extra.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_tool(*command: str) -> subprocess.CompletedProcess:
    import importlib.util

    if importlib.util.find_spec(command[0]) is None:
        raise AssertionError(f"{command[0]} is not installed: pip install -e '.[test]' (pyproject.toml lists it)")
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    result = run_tool("ruff", "check", "--no-cache", "distlab", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_changes_nothing():
    result = run_tool("ruff", "format", "--check", "--no-cache", "distlab", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def mypy_cache() -> Path:
    """mypy's incremental cache for this checkout and this Python, in the temporary folder (never in the checkout):
    the installed packages' analysis (torch's 1,394 modules are most of a cold run's 24 s) is reused by the next run
    of the suite, and mypy re-checks every module whose source changed and the modules that depend on it. A clean
    clone (another path) starts cold."""
    import hashlib
    import tempfile

    key = hashlib.sha256(f"{ROOT}\0{sys.executable}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"distlab-mypy-{key}"


def test_mypy_finds_nothing():
    result = run_tool("mypy", "--incremental", "--cache-dir", str(mypy_cache()), "--python-executable", sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
