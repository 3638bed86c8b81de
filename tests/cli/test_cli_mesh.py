"""`distlab mesh` prints the groups distlab.mesh computes, as text or JSON, and reports our errors cleanly."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distlab import cli, mesh

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    return subprocess.run([sys.executable, "-m", "distlab", *args], capture_output=True, text=True, cwd=ROOT)


def test_megatron_example_as_text():
    proc = run("mesh", "--gpus", "16", "--tp", "2", "--pp", "4")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "16 GPUs = tp 2 x dp 2 x pp 4; order tp-dp-pp" in out
    assert "tp: 8 groups of 2, each inside one node: [0, 1] [2, 3] [4, 5]" in out
    assert "dp: 8 groups of 2, each inside one node: [0, 2] [1, 3] [4, 6] [5, 7]" in out
    assert "pp: 4 groups of 4, each across nodes: [0, 4, 8, 12] [1, 5, 9, 13]" in out
    assert 'init_device_mesh("cuda", (4, 2, 2), mesh_dim_names=("pp", "dp", "tp"))' in out


def test_json_has_every_group_and_the_rank(capsys):
    assert (
        cli.main(["mesh", "--gpus", "16", "--tp", "2", "--pp", "4", "--gpus-per-node", "4", "--json", "--rank", "5"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    want = mesh.layout(16, tp=2, pp=4, gpus_per_node=4)
    for d in mesh.DIMENSIONS:
        assert data["dimensions"][d]["groups"] == want.groups(d).tolist()
    assert data["dimensions"]["pp"]["link"] == "inter-node" and data["nodes"] == 4
    assert data["rank"]["groups"] == {"tp": [4, 5], "dp": [5, 7], "pp": [1, 5, 9, 13]}
    assert data["rank"]["node"] == 1


def test_reversed_order_warns_in_text(capsys):
    assert (
        cli.main(
            [
                "mesh",
                "--gpus",
                "64",
                "--tp",
                "8",
                "--pp",
                "2",
                "--order",
                "pp-dp-tp",
                "--max-groups",
                "2",
                "--rank",
                "9",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "tp: 8 groups of 8, each across nodes: [0, 8, 16, 24, 32, 40, 48, 56] [1, 9, 17" in out
    assert "(6 more)" in out and "warning: TP leaves the node" in out
    assert "rank 9 on node 1: tp 1, dp 0, pp 1" in out


@pytest.mark.parametrize(
    "args, words",
    [
        (["--gpus", "16", "--tp", "3"], "gpus=16 is not a multiple of tp=3"),
        (["--gpus", "16", "--tp", "2", "--order", "tp-xx"], "unknown dimension 'xx'"),
        (["--tp", "2"], "give the number of GPUs"),
        (["--gpus", "16", "--rank", "99"], "rank=99 is out of range; valid: 0 to 15"),
        (["--gpus", "16", "--max-groups", "0"], "--max-groups 0 must be at least 1"),
    ],
)
def test_errors_are_messages_not_tracebacks(args, words):
    proc = run("mesh", *args)
    assert proc.returncode == 2
    assert words in proc.stderr and "Traceback" not in proc.stderr
