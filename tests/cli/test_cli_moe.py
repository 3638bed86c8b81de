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
