"""The README's examples are real: run them and compare with the output printed there."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_python_example_prints_what_the_readme_shows():
    match = re.search(r"```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", README, re.S)
    assert match, "README lost its Python example"
    code, shown = match.groups()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out == shown


def test_cli_example_prints_what_the_readme_shows():
    match = re.search(r"```\n\$ distlab (memory [^\n]*)\n(.*?)```", README, re.S)
    assert match, "README lost its CLI example"
    args, shown = match.groups()
    out = subprocess.run(
        [sys.executable, "-m", "distlab", *args.split()], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out == shown


def test_the_two_commands_are_the_ones_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = re.search(r"```bash\n(python3 -m venv .venv && [^\n]*pytest)\n```", README).group(1)
    assert test_command in ci
    assert re.search(r"```bash\npython3 -m venv .venv && [^\n]*jupyter lab [^\n]*\n```", README)
