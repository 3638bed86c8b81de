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


def test_mypy_finds_nothing():
    result = run_tool("mypy", "--no-incremental", "--python-executable", sys.executable)
    assert result.returncode == 0, result.stdout + result.stderr
