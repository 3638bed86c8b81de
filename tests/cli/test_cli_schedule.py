"""`distlab schedule`: the grid as text, the bubble, JSON keys, and our errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distlab import cli, pipeline
from distlab.commands.schedule import parse_ratio

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "distlab", "schedule", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_text_grid_and_bubble_of_the_lecture_example():
    # p = 4, m = 8, GPipe, backward = 2 x forward: the step is (m + p - 1) x 3 = 33 forwards long,
    # each stage computes 8 x 3 = 24 of it: 9/33 = 27.27 % idle (the lecture's 3/11)
    proc = run("--kind", "gpipe", "--stages", "4", "--microbatches", "8")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rows = [line for line in lines if line.startswith("stage ")]
    assert len(rows) == 4
    # one column per forward (the shortest op); stage 0 runs its 8 forwards first
    assert rows[0].split("|")[1].split()[:9] == ["F0", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "."]
    assert rows[3].split("|")[1].split()[:3] == [".", ".", "."]
    assert "step time: 33 t_F" in proc.stdout
    assert "bubble: 27.27% of the step idle" in proc.stdout and "closed form 27.27%" in proc.stdout
    assert "time added over ideal compute: 37.50%" in proc.stdout
    assert "peak microbatches in flight per stage: 8, 8, 8, 8" in proc.stdout


def test_json_keys(capsys):
    assert cli.main(["schedule", "--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    tl = pipeline.schedule("1f1b", 4, 8)  # default ratio 1:1:1, t_F = 1
    assert data["bubble_fraction"] == pytest.approx(3 / 11)
    assert data["step_time"] == 33.0
    assert data["grid"] == tl.grid().splitlines() and len(data["grid"]) == 4
    assert data["peak_in_flight"] == [4.0, 3.0, 2.0, 1.0]
    assert data["ratio"] == {"F": 1.0, "B": 1.0, "W": 1.0} and data["time_unit"] == "t_F"
    assert len(data["ops"]) == 4 * 2 * 8


def test_interleaved_chunks_units_and_ratio():
    # interleaved p = 2, m = 4, v = 2, a forward of 2 ms: the closed form gives a step of
    # m (t_F + t_B) (1 + (p-1)/(v m)) = 4 x 6 ms x 9/8 = 27 ms
    proc = run("--kind", "interleaved", "-p", "2", "-m", "4", "-v", "2", "--forward", "2 ms", "--json")
    data = json.loads(proc.stdout)
    assert data["step_time"] == pytest.approx(27e-3)
    assert data["chunks"] == 2 and "F0.1" in " ".join(data["grid"])
    assert data["time_unit"] == "s"
    # ZB-H1 with W = 0 has nothing to fill the drain: it is 1F1B's bubble, (p-1)/(m+p-1)
    zero_w = json.loads(run("--kind", "zb-h1", "-p", "4", "-m", "8", "--ratio", "1:2:0", "--json").stdout)
    assert zero_w["bubble_fraction"] == pytest.approx(3 / 11)


def test_model_adds_activation_memory():
    proc = run("--kind", "1f1b", "-p", "4", "-m", "8", "--model", "llama2-7b", "--recompute", "selective", "--json")
    data = json.loads(proc.stdout)
    want = pipeline.activation_memory(pipeline.schedule("1f1b", 4, 8), "llama2-7b", recompute="selective")
    assert data["activation_memory"]["peak_bytes"] == pytest.approx(want.peak_bytes)
    text = run("--kind", "1f1b", "-p", "4", "-m", "8", "--model", "llama2-7b").stdout
    assert "peak: " in text and "on stage 0" in text


@pytest.mark.parametrize(
    "args, words",
    [
        (["--kind", "pipedream"], "valid: naive, gpipe, 1f1b, interleaved, zb-h1"),
        (["--kind", "interleaved", "-p", "4", "-m", "6", "-v", "2"], "multiple of stages"),
        (["--kind", "1f1b", "-v", "2"], "chunks=2 applies only to the interleaved schedule"),
        (["--stages", "0"], "stages=0 must be a positive whole number"),
        (["--ratio", "1:x:1"], "must be numbers"),
        (["--ratio", "1:1"], "three numbers F:B:W"),
        (["--ratio", "1:0:1"], "F and B must be positive"),
        (["--forward", "2 GB"], "wrong dimension"),
        (["--microbatches", "16", "--batch", "8"], "exceeds the 8 samples"),
        (["--kind", "zb-h1", "-p", "8", "-m", "4"], "zb-h1 needs microbatches >= stages"),
        (["--model", "llama-7b"], "closest"),
    ],
)
def test_errors_are_messages(args, words, capsys):
    # in-process: any exception other than our DistlabError would escape cli.main and fail here
    assert cli.main(["schedule", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("distlab: error: ") and words in err


@pytest.mark.parametrize(
    "args, words",
    [
        (["--kind", "interleaved", "-p", "4", "-m", "6", "-v", "2"], "valid: 4, 8, 12"),
        (["--ratio", "1:-1:0"], "F and B must be positive"),
    ],
)
def test_errors_exit_2_without_traceback(args, words):
    proc = run(*args)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_parse_ratio():
    assert parse_ratio("1:1:1") == (1.0, 1.0, 1.0)
    assert parse_ratio(" 1 : 2 : 0 ") == (1.0, 2.0, 0.0)


def test_schedules_after_1f1b_print_the_papers_bubble():
    # ZB-V, p = 4, m = 8, F = B = W: no idle inside any stage's span (Qi et al. 2024); no closed form line
    proc = run("--kind", "zb-v", "--stages", "4", "--microbatches", "8")
    assert proc.returncode == 0, proc.stderr
    assert "idle inside each stage's own span (the papers' bubble): 0 t_F, 0 t_F, 0 t_F, 0 t_F" in proc.stdout
    assert "closed form" not in proc.stdout
    proc = run("--kind", "dualpipe", "--stages", "3", "--microbatches", "8")
    assert proc.returncode == 2 and "even number of stages" in proc.stderr and "Traceback" not in proc.stderr
