"""The distlab command line calls the same functions as the lessons and reports our errors cleanly."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distlab import cli, memory

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    return subprocess.run([sys.executable, "-m", "distlab", *args], capture_output=True, text=True, cwd=ROOT)


def test_memory_json_keys_are_plain_byte_numbers():
    proc = run("memory", "--params", "7.5B", "--zero", "3", "--dp", "64", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "total_bytes"):
        assert isinstance(data[key], float)
    # ZeRO paper: 16 x 7.5e9 / 64 = 1.875e9 B
    assert data["total_bytes"] == pytest.approx(1.875e9)
    assert data["fits"] is None


def test_memory_of_a_catalog_model_with_a_gpu(capsys):
    assert cli.main(["memory", "--model", "LLAMA2-7B", "--gpu", "h100-sxm", "--json", "--recompute", "full"]) == 0
    data = json.loads(capsys.readouterr().out)
    want = memory.training_memory("llama2-7b", gpu="h100-sxm", recompute="full")
    assert data["total_bytes"] == pytest.approx(want.total_bytes)
    assert data["fits"] is want.fits


@pytest.mark.parametrize(
    "args, words",
    [
        (["memory", "--params", "7B", "--zero", "7"], "valid: 0, 1, 2, 3"),
        (["memory", "--model", "llama-7b"], "closest"),
        (["memory", "--params", "seven"], "not a parameter count"),
        (["memory"], "exactly one of --model"),
        (["memory", "--params", "7B", "--gpu", "80 GB/s"], "wrong dimension"),
    ],
)
def test_errors_are_messages_not_tracebacks(args, words):
    proc = run(*args)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("text, count", [("7B", 7e9), ("350M", 3.5e8), ("1.5T", 1.5e12), ("70e9", 7e10), ("12k", 12e3)])
def test_parse_count(text, count):
    assert cli.parse_count(text) == count


def test_exercises_check_passes_on_the_committed_tree():
    proc = run("exercises", "--check")
    assert proc.returncode == 0 and "matches" in proc.stdout


def test_exercises_check_reports_drift(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "x.ipynb").write_text((ROOT / "solutions" / "01_memory_wall.ipynb").read_text())
    proc = run("exercises", "--solutions", str(tmp_path / "solutions"), "--exercises", str(tmp_path / "ex"), "--check")
    assert proc.returncode == 1 and "x.ipynb" in proc.stdout
    assert (
        run("exercises", "--solutions", str(tmp_path / "solutions"), "--exercises", str(tmp_path / "ex")).returncode
        == 0
    )
    assert (tmp_path / "ex" / "x.ipynb").exists()


@pytest.mark.parametrize(
    "entry",
    ["from distlab.cli import main\nmain(['validate', '--json'])\n", "from distlab.grading import grade\n"],
    ids=["a distlab command", "a process importing distlab.grading"],
)
def test_distlab_commands_skip_jsonschemas_slow_optional_import(entry):
    # jsonschema imports rfc3987_syntax (38 grammars built, 1.1 s of CPU) for "iri" format checks that nbformat's
    # schemas never make; `distlab grade` of one notebook took 3.45 s before, 2.48 s after. The command's process (and
    # any process that imports the grading package: a script or a test grading notebooks) sees the module as absent,
    # and a notebook still validates
    code = (
        "import sys\n" + entry + "import nbformat, jsonschema\n"
        "nbformat.validate(nbformat.v4.new_notebook())\n"
        "print('loaded' if sys.modules.get('rfc3987_syntax') else 'absent', file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "absent"
