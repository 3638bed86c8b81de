"""`distlab collective`: bytes and time of one collective, as text or JSON, with our errors on bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distlab import cli

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    return subprocess.run([sys.executable, "-m", "distlab", *args], capture_output=True, text=True, cwd=ROOT)


def test_all_reduce_json_is_plain_numbers():
    proc = run("collective", "--op", "all-reduce", "--size", "14GB", "--gpus", "8", "--link", "nvlink4", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    # 2(N-1)/N x M = 2 x 7/8 x 14 GB = 24.5 GB; t = 14 x 3.4 us + 24.5 GB / 450 GB/s (NVLink 4 per direction)
    assert isinstance(data["bytes_sent_per_gpu"], float) and isinstance(data["time_s"], float)
    assert data["bytes_sent_per_gpu"] == pytest.approx(24.5e9)
    assert data["time_s"] == pytest.approx(14 * 3.4e-6 + 24.5e9 / 450e9)
    assert data["algorithm"] == "ring" and data["steps"] == 14 and data["link"] == "nvlink4"
    # nccl-tests bus bandwidth of a ring is the link bandwidth minus the latency's share: just under 450 GB/s
    assert 440 < data["busbw_gbps"] < 450


def test_text_output_names_the_phases(capsys):
    assert (
        cli.main(
            [
                "collective",
                "--size",
                "4 GB",
                "--gpus",
                "16",
                "--link",
                "nvlink4",
                "--algorithm",
                "hierarchical",
                "--gpus-per-node",
                "8",
                "--inter-link",
                "ib-ndr",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # intra reduce-scatter 7/8 x 4 GB = 3.5 GB; inter all-reduce of M/8 over 2 nodes: 2 x 1/2 x 0.5 GB = 500 MB
    assert "hierarchical all-reduce of 4 GB over 16 GPUs" in out
    assert "intra-node reduce-scatter" in out and "3.5 GB" in out and "500 MB" in out


@pytest.mark.parametrize(
    "op, algorithm, sent",
    [
        ("all-gather", None, 3.5e9),  # (N-1)/N x M
        ("reduce-scatter", None, 3.5e9),
        ("broadcast", None, 4e9),  # pipelined chain: every link carries M once
        ("all-reduce", "parameter-server", 28e9),  # the server returns M to 7 workers
        ("allreduce", "tree", 8e9),  # double binary tree, busiest rank: 2 M
    ],
)
def test_ops_and_algorithms(capsys, op, algorithm, sent):
    args = ["collective", "--op", op, "--size", "4 GB", "--gpus", "8", "--bandwidth", "50 GB/s", "--json"]
    if algorithm:
        args += ["--algorithm", algorithm]
    assert cli.main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bytes_sent_per_gpu"] == pytest.approx(sent)
    assert data["time_s"] == pytest.approx(data["bandwidth_time_s"])  # --bandwidth alone: latency 0


def test_one_gpu_costs_nothing(capsys):
    assert cli.main(["collective", "--size", "4 GB", "--gpus", "1", "--link", "ib-ndr", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bytes_sent_per_gpu"] == 0 and data["time_s"] == 0 and "busbw_gbps" not in data


@pytest.mark.parametrize(
    "args, words",
    [
        (["--size", "4 GB", "--gpus", "8"], "give --link"),
        (["--size", "4 GB", "--gpus", "8", "--link", "nvlink9"], "closest"),
        (["--op", "allsum", "--size", "4 GB", "--gpus", "8", "--link", "nvlink4"], "unknown collective op"),
        (["--size", "4 GB/s", "--gpus", "8", "--link", "nvlink4"], "wrong dimension"),
        (["--size", "-1 GB", "--gpus", "8", "--link", "nvlink4"], "must not be negative"),
        (["--size", "4 GB", "--gpus", "0", "--link", "nvlink4"], "gpus=0"),
        (
            ["--size", "4 GB", "--gpus", "8", "--link", "nvlink4", "--algorithm", "tree", "--op", "all-gather"],
            "valid: ring",
        ),
        (["--size", "4 GB", "--gpus", "16", "--link", "nvlink4", "--algorithm", "hierarchical"], "gpus_per_node"),
    ],
)
def test_errors_are_messages_not_tracebacks(args, words):
    proc = run("collective", *args)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
