"""`distlab triage`: the ladder and fixes of distlab.triage.oom_triage, as text and JSON; our errors."""

from __future__ import annotations

import json

import pytest

from distlab import cli, triage

CLUSTER = [
    "--model",
    "llama3.1-70b",
    "--gpus",
    "256",
    "--node",
    "dgx-h100",
    "--fabric",
    "ib-ndr",
    "--global-batch",
    "256",
    "--seq",
    "8192",
]
# unfused attention: the stored attention scores are what the hand-derived figures below (469 GB, selective
# recomputation as the first fit) count; with flash attention (the default) they are never stored
OOM = ["--tp", "8", "--pp", "4", "--micro-batch-size", "4", "--sequence-parallel", "--attention", "unfused"]


def run(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def library():
    return triage.oom_triage(
        "llama3.1-70b",
        "dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        tp=8,
        pp=4,
        micro_batch_size=4,
        sequence_parallel=True,
        attention="unfused",
    )


def test_triage_is_discovered_by_the_cli():
    assert "triage" in cli.build_parser().format_help()


def test_json_matches_the_library(capsys):
    code, out, _ = run(capsys, "triage", *CLUSTER, *OOM, "--json")
    assert code == 0
    data = json.loads(out)
    want = library()
    assert data["already_fits"] is False
    assert [r["change"] for r in data["ladder"]] == [s.change for s in want.ladder]
    assert [r["memory_per_gpu_bytes"] for r in data["ladder"]] == pytest.approx(
        [s.memory_per_gpu_bytes for s in want.ladder]
    )
    assert data["first_fit"]["change"] == want.first_fit.change == "selective recomputation"
    # the ladder: b 4 -> 2 -> 1 (m = 256 / (8 b) = 8, 16, 32 >= pp: fewer sequences in flight), then selective
    assert [r["change"] for r in data["ladder"]] == [
        "micro_batch_size=2",
        "micro_batch_size=1",
        "selective recomputation",
    ]
    assert data["ladder"][-1]["fits"] and not any(r["fits"] for r in data["ladder"][:-1])
    kinds = [f["kind"] for f in data["fixes"]]
    assert kinds == sorted(kinds, key=triage.TRIAGE_ORDER.index)
    skipped = [f for f in data["fixes"] if f["skipped"]]
    assert [f["change"] for f in skipped] == ["tp=16"] and "must divide the 8 GPUs" in skipped[0]["skipped"]


def test_text_output(capsys):
    code, out, _ = run(capsys, "triage", *CLUSTER, *OOM)
    assert code == 0
    assert "needs 469 GB per GPU" in out and "first fit: selective recomputation at rung 3" in out
    assert "ladder (each rung on top of the previous" in out and "skipped: tp=16" in out


def test_already_fits(capsys):
    code, out, _ = run(
        capsys,
        "triage",
        *CLUSTER,
        "--tp",
        "8",
        "--pp",
        "4",
        "--zero",
        "1",
        "--recompute",
        "selective",
        "--sequence-parallel",
    )
    assert code == 0 and "already fits" in out and "nothing to fix" in out
    code, out, _ = run(
        capsys,
        "triage",
        *CLUSTER,
        "--tp",
        "8",
        "--pp",
        "4",
        "--zero",
        "1",
        "--recompute",
        "selective",
        "--sequence-parallel",
        "--json",
    )
    data = json.loads(out)
    assert data["already_fits"] is True and data["ladder"] == [] and data["first_fit"] is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tp", "3"], "tp x pp = 3 x 1 must divide --gpus 256"),
        (["--recompute", "sometimes"], "recompute='sometimes' is not a recomputation mode"),
        (["--zero", "5"], "zero=5 is not a ZeRO stage"),
    ],
)
def test_errors_are_ours(capsys, args, message):
    code, out, err = run(capsys, "triage", *CLUSTER, *args)
    assert code == 2 and out == "" and message in err and "Traceback" not in err
