"""`distlab estimate`, `plan` and `export`: JSON keys, the same numbers as the library, our errors."""

from __future__ import annotations

import json
import tomllib

import pytest

from distlab import cli, export, planner, training
from distlab.commands.plan import ties_report

CLUSTER = [
    "--model",
    "llama3.1-70b",
    "--gpus",
    "32",
    "--node",
    "dgx-h100",
    "--fabric",
    "ib-ndr",
    "--global-batch",
    "64",
    "--seq",
    "2048",
]


def run(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_estimate_json_matches_the_library(capsys):
    code, out, _ = run(
        capsys,
        "estimate",
        *CLUSTER,
        "--tp",
        "2",
        "--pp",
        "2",
        "--microbatches",
        "8",
        "--zero",
        "1",
        "--recompute",
        "selective",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    # --gpus 32 on 8-GPU nodes = 4 nodes; dp = 32 / (2 x 2) = 8; micro-batch = 64 / (8 x 8) = 1
    want = training.estimate(
        "llama3.1-70b",
        "dgx-h100",
        nodes=4,
        fabric="ib-ndr",
        global_batch=64,
        seq_len=2048,
        tp=2,
        pp=2,
        micro_batch_size=1,
        zero=1,
        recompute="selective",
    )
    for key in ("step_time_s", "mfu", "tokens_per_s", "memory_per_gpu_bytes", "fits"):
        assert data[key] == pytest.approx(
            getattr(want, key) if key != "memory_per_gpu_bytes" else want.memory.total_bytes
        )
    assert (data["dp"], data["microbatches"], data["micro_batch_size"]) == (8, 8, 1)


def test_microbatches_fix_the_micro_batch_size(capsys):
    # dp = 32 / 2 = 16, m = 2 -> micro-batch = 64 / (16 x 2) = 2
    code, out, _ = run(capsys, "estimate", *CLUSTER, "--pp", "2", "--microbatches", "2", "--json")
    assert code == 0 and json.loads(out)["micro_batch_size"] == 2
    code, _, err = run(capsys, "estimate", *CLUSTER, "--pp", "2", "--microbatches", "3")
    assert code == 2 and "--microbatches 3" in err and "Traceback" not in err
    code, _, err = run(capsys, "estimate", *CLUSTER, "--pp", "2", "--microbatches", "2", "--micro-batch-size", "1")
    assert code == 2 and "= 2, not --micro-batch-size 1" in err


def test_estimate_text_of_pure_dp_says_why_not_and_what_would_fit(capsys):
    code, out, _ = run(capsys, "estimate", *CLUSTER)
    assert code == 0
    assert "NOT FEASIBLE: memory" in out and "ZeRO-3" in out and "saves" in out


def test_gpus_must_fill_nodes(capsys):
    code, _, err = run(capsys, "estimate", *[a if a != "32" else "12" for a in CLUSTER])
    assert code == 2 and "whole number of dgx-h100 nodes of 8 GPUs" in err


def test_plan_json_is_the_planner_ranking(capsys):
    code, out, _ = run(capsys, "plan", *CLUSTER, "--top", "5", "--json")
    assert code == 0
    rows = json.loads(out)
    p = planner.plan("llama3.1-70b", "dgx-h100", nodes=4, fabric="ib-ndr", global_batch=64, seq_len=2048)
    assert rows == json.loads(json.dumps(p.top(5)))
    for key in (
        "dp",
        "tp",
        "pp",
        "microbatches",
        "zero",
        "recompute",
        "step_time_s",
        "mfu",
        "memory_per_gpu_bytes",
        "fits",
    ):
        assert key in rows[0]
    assert [r["step_time_s"] for r in rows] == sorted(r["step_time_s"] for r in rows)
    code, out, _ = run(capsys, "plan", *CLUSTER, "--top", "3")
    lines = out.splitlines()
    head = len(p.summary().splitlines())  # the summary goes on over a second line when some were not evaluated
    assert code == 0 and "fit in memory" in out and lines[head].startswith("≈")  # summary, header, 3 rows, ties
    assert len(lines) == head + 4 + len(ties_report(p).splitlines())


def test_plan_prints_the_error_band_the_ties_and_what_decides(capsys):
    code, out, _ = run(capsys, "plan", *CLUSTER, "--top", "3")
    p = planner.plan("llama3.1-70b", "dgx-h100", nodes=4, fabric="ib-ndr", global_batch=64, seq_len=2048)
    band = p.band_percent  # the band of H100 runs in mixed precision (validation.error_band), not the whole set's
    assert code == 0 and f"±{band:.1f}%" in out and f"{p.tie_count(0)} tied configuration" in out
    tied = p.tie_count(0)
    marked = [line.startswith("≈") for line in out.splitlines()[2:5]]
    assert marked == [r < tied for r in range(3)]
    if tied > 1:
        assert "rests on:" in out


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_export_best_parses_back_to_a_feasible_configuration(capsys, fmt):
    code, out, _ = run(capsys, "export", "--format", fmt, "--best", *CLUSTER)
    assert code == 0
    if fmt == "megatron":
        got = export.parse_megatron(out)
        dp, tp, pp = got["dp"], got["tp"], got["pp"]
    elif fmt == "deepspeed":
        cfg = json.loads(out)
        tp = cfg.get("tensor_parallel", {"autotp_size": 1})["autotp_size"]
        pp = cfg.get("pipeline", {"stages": 1})["stages"]
        dp = cfg["train_batch_size"] // (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"])
    else:
        par = tomllib.loads(out)["parallelism"]
        dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
        tp, pp = par["tensor_parallel_degree"], par["pipeline_parallel_degree"]
    assert dp * tp * pp == 32
    # the exported degrees are those of a feasible row of the planner's ranking
    p = planner.plan("llama3.1-70b", "dgx-h100", nodes=4, fabric="ib-ndr", global_batch=64, seq_len=2048)
    feasible = {(r["dp"], r["tp"], r["pp"]) for r in p.top(p.feasible_count)}
    assert (dp, tp, pp) in feasible


def test_export_given_configuration_and_its_errors(capsys):
    code, out, _ = run(
        capsys,
        "export",
        "--format",
        "torchtitan",
        *CLUSTER,
        "--tp",
        "4",
        "--pp",
        "2",
        "--zero",
        "3",
        "--recompute",
        "full",
    )
    assert code == 0
    assert tomllib.loads(out)["parallelism"]["data_parallel_shard_degree"] == 4
    code, out, _ = run(
        capsys,
        "export",
        "--format",
        "megatron",
        *CLUSTER,
        "--tp",
        "4",
        "--pp",
        "2",
        "--zero",
        "3",
        "--recompute",
        "full",
    )  # ZeRO-3 through Megatron-FSDP
    assert code == 0 and export.parse_megatron(out)["zero"] == 3 and "--use-megatron-fsdp" in out
    code, _, err = run(
        capsys,
        "export",
        "--format",
        "torchtitan",
        *CLUSTER,
        "--tp",
        "4",
        "--pp",
        "2",
        "--zero",
        "1",
        "--recompute",
        "full",
    )
    assert code == 2 and "zero=1" in err
    code, _, err = run(capsys, "export", "--format", "megatron", *CLUSTER)  # pure DP: does not fit
    assert code == 2 and "cannot run" in err
    code, _, err = run(capsys, "export", "--format", "nemo", *CLUSTER, "--best")
    assert code == 2 and "valid: megatron" in err
