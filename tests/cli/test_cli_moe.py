"""distlab memory with mixture-of-experts models (Lesson 10 §4): the CLI calls distlab.moe."""

import json

import pytest

from distlab import cli, moe


def test_moe_memory_json_equals_the_library(capsys):
    assert cli.main(["memory", "--model", "deepseek-v3", "--dp", "128", "--pp", "16", "--ep", "64", "--zero", "1",
                     "--gpu", "h100-sxm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    want = moe.expert_parallel_memory("deepseek-v3", 2048, pp=16, ep=64, zero=1)
    assert data["total_bytes"] == want.total_bytes and data["edp"] == 2 and data["fits"] is True


def test_moe_memory_text_names_both_groups(capsys):
    assert cli.main(["memory", "--model", "mixtral-8x7b", "--dp", "8", "--ep", "8"]) == 0
    out = capsys.readouterr().out
    assert "edp=1" in out and "1 experts per MoE layer" in out and "activations are not included" in out


@pytest.mark.parametrize("args, words", [
    (["memory", "--model", "llama2-7b", "--ep", "8"], "--ep and --etp apply to mixture-of-experts"),
    (["memory", "--model", "mixtral-8x7b", "--dp", "3", "--ep", "3"], "ep=3 does not divide the 8 experts"),
])
def test_moe_memory_errors_are_ours(args, words, capsys):
    assert cli.main(args) == 2
    assert words in capsys.readouterr().err


def test_export_of_an_moe_configuration_is_the_library_text(capsys):
    assert cli.main(["export", "--format", "megatron", "--model", "deepseek-v3", "--gpus", "2048", "--global-batch",
                     "15360", "--pp", "16", "--ep", "64", "--max-nodes", "4"]) == 0
    want = moe.megatron_moe(moe.moe_config("deepseek-v3", 2048, pp=16, ep=64, global_batch=15360, max_nodes=4))
    assert capsys.readouterr().out.strip() == want


@pytest.mark.parametrize("args, words", [
    (["--model", "mixtral-8x7b", "--format", "torchtitan", "--ep", "8"], "no flavor of mixtral-8x7b"),
    (["--model", "mixtral-8x7b", "--format", "megatron", "--ep", "8", "--best"], "does not search MoE"),
    (["--model", "llama2-7b", "--format", "megatron", "--ep", "8"], "apply to mixture-of-experts models"),
])
def test_moe_export_errors_are_ours(args, words, capsys):
    assert cli.main(["export", "--gpus", "64", "--global-batch", "256", *args]) == 2
    assert words in capsys.readouterr().err
