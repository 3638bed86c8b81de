"""`distlab plan --partial-recompute` and `distlab export --best --partial-recompute`: the planner's partial-layer
recomputation search (planner.plan(partial_recompute=True)) through the CLI, and its N written for the engine."""

from __future__ import annotations

import json

from distlab import cli, export, planner
from cli_exported import exported

SMALL = ["--model", "llama2-7b", "--gpus", "8", "--global-batch", "64", "--seq", "4096"]
#: a case whose fastest Megatron-expressible configuration recomputes only some layers (7 of 80, pp 1)
TIGHT = ["--model", "llama3.1-70b", "--gpus", "32", "--global-batch", "32", "--seq", "32768"]


def test_plan_json_rows_are_the_librarys(capsys):
    assert cli.main(["plan", *SMALL, "--partial-recompute", "--top", "40", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    p = planner.plan("llama2-7b", "dgx-h100", nodes=1, global_batch=64, seq_len=4096, partial_recompute=True)
    assert rows == p.top(40)
    assert all("recompute_layers" in r for r in rows)


def test_plan_table_shows_full_n_only_when_asked(capsys):
    assert cli.main(["plan", *SMALL, "--partial-recompute", "--top", "400"]) == 0
    assert "full:17" in capsys.readouterr().out  # tests/core/test_plan_partial_recompute.py derives the 17
    assert cli.main(["plan", *SMALL, "--top", "400"]) == 0
    assert "full:" not in capsys.readouterr().out


def test_export_best_writes_megatrons_block_method(capsys, monkeypatch):
    code, seen = exported(monkeypatch, ["export", "--format", "megatron", "--best", "--partial-recompute", *TIGHT])
    text = capsys.readouterr().out
    assert code == 0 and "--recompute-method block" in text and "--recompute-num-layers 7" in text
    est = seen[-1]
    assert est.config["recompute"] == "full" and est.config["recompute_layers"] == 7 and est.feasible
    assert export.parse_megatron(text)["recompute_layers"] == 7
    code, seen = exported(monkeypatch, ["export", "--format", "megatron", "--best", *TIGHT])
    assert code == 0 and "recompute_layers" not in seen[-1].config
    assert est.step_time_s <= seen[-1].step_time_s  # the search can only add faster fitting rows


def test_export_best_to_torchtitan_translates_or_skips(capsys, monkeypatch):
    code, seen = exported(monkeypatch, ["export", "--format", "torchtitan", "--best", "--partial-recompute", *TIGHT])
    assert code == 0 and "[activation_checkpoint]" in capsys.readouterr().out
    assert seen and all(est.feasible for est in seen)


def test_partial_recompute_without_best_is_our_error(capsys):
    assert cli.main(["export", "--format", "megatron", *SMALL, "--partial-recompute"]) == 2
    assert "--partial-recompute applies to --best" in capsys.readouterr().err
