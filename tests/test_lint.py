"""The linter runs with the README's test command (CI runs only that): `ruff check distlab tests` must be clean.

The rules are in pyproject.toml ([tool.ruff]); ruff comes with the [test] extra.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    try:
        import ruff  # noqa: F401
    except ImportError:
        raise AssertionError("ruff is not installed: pip install -e '.[test]' (pyproject.toml lists it)") from None
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "distlab", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
