"""distlab memory with mixture-of-experts models (Lesson 10 §4): the CLI calls distlab.moe."""

import json

import pytest

from distlab import cli, moe


def test_moe_memory_json_equals_the_library(capsys):
    assert (
        cli.main(
            [
                "memory",
                "--model",
                "deepseek-v3",
                "--dp",
                "128",
                "--pp",
                "16",
                "--ep",
                "64",
                "--zero",
                "1",
                "--gpu",
                "h100-sxm",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    want = moe.expert_parallel_memory("deepseek-v3", 2048, pp=16, ep=64, zero=1)
    assert data["total_bytes"] == want.total_bytes and data["edp"] == 2
    # activations: the first stage's ceil(61 / 16) = 4 layers x 16 microbatches in flight; without recomputation
    # each keeps the 128 heads' 4096 x 4096 softmax output (2 B) alone: 4.3 GB, so 64 x 4.3 GB cannot fit 80 GB
    assert data["activations_bytes"] > 4 * 16 * 128 * 4096 * 4096 * 2 and data["fits"] is False


def test_moe_memory_with_full_recomputation_fits(capsys):
    args = ["memory", "--model", "deepseek-v3", "--dp", "128", "--pp", "16", "--ep", "64", "--zero", "1"]
    assert cli.main(args + ["--seq-len", "4096", "--recompute", "full", "--gpu", "h100-sxm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # full recomputation keeps each layer's input: 4096 x 7168 x 2 B, x 4 layers x 16 microbatches = 3.76 GB
    assert data["activations_bytes"] == 4096 * 7168 * 2 * 4 * 16
    assert data["total_with_activations_bytes"] == data["total_bytes"] + data["activations_bytes"]
    assert data["fits"] is True


def test_moe_memory_text_names_both_groups(capsys):
    assert cli.main(["memory", "--model", "mixtral-8x7b", "--dp", "8", "--ep", "8"]) == 0
    out = capsys.readouterr().out
    assert "edp=1" in out and "1 experts per MoE layer" in out and "activations " in out and "recompute none" in out


@pytest.mark.parametrize(
    "args, words",
    [
        (["memory", "--model", "llama2-7b", "--ep", "8"], "--ep and --etp apply to mixture-of-experts"),
        (["memory", "--model", "mixtral-8x7b", "--dp", "3", "--ep", "3"], "ep=3 does not divide the 8 experts"),
    ],
)
def test_moe_memory_errors_are_ours(args, words, capsys):
    assert cli.main(args) == 2
    assert words in capsys.readouterr().err


def test_export_of_an_moe_configuration_is_the_library_text(capsys):
    assert (
        cli.main(
            [
                "export",
                "--format",
                "megatron",
                "--model",
                "deepseek-v3",
                "--gpus",
                "2048",
                "--global-batch",
                "15360",
                "--pp",
                "16",
                "--ep",
                "64",
                "--max-nodes",
                "4",
            ]
        )
        == 0
    )
    want = moe.megatron_moe(moe.moe_config("deepseek-v3", 2048, pp=16, ep=64, global_batch=15360, max_nodes=4))
    assert capsys.readouterr().out.strip() == want


@pytest.mark.parametrize(
    "args, words",
    [
        (["--model", "mixtral-8x7b", "--format", "torchtitan", "--ep", "8"], "no flavor of mixtral-8x7b"),
        (
            ["--model", "mixtral-8x7b", "--format", "torchtitan", "--best"],
            "no feasible MoE configuration that torchtitan",
        ),
        (["--model", "llama2-7b", "--format", "megatron", "--ep", "8"], "apply to mixture-of-experts models"),
    ],
)
def test_moe_export_errors_are_ours(args, words, capsys):
    assert cli.main(["export", "--gpus", "64", "--global-batch", "256", *args]) == 2
    assert words in capsys.readouterr().err


def test_export_best_of_an_moe_model_is_the_planners_fastest_row(capsys):
    """The fastest row over the plans made with each of Megatron's own memory recipes (export plans with the
    engine's recipes, never the 16 B/parameter teaching count)."""
    from distlab import export, hardware, planner

    args = ["--model", "mixtral-8x7b", "--gpus", "32", "--global-batch", "256", "--seq", "4096"]
    assert cli.main(["export", "--format", "megatron", "--best", *args]) == 0
    cl = hardware.cluster("dgx-h100", 4, "ib-ndr")
    plans = [
        planner.plan("mixtral-8x7b", cl, global_batch=256, seq_len=4096, memory_recipe=r)
        for r in export.engine_recipes("megatron")
    ]
    row = min((p.row(0) for p in plans if p.feasible_count), key=lambda r: r["step_time_s"])
    # the fastest feasible row has cp = 1 here, and Megatron expresses every MoE layout
    assert row["fits"] and row["cp"] == 1
    want = moe.megatron_moe(
        moe.moe_config(
            "mixtral-8x7b",
            32,
            tp=row["tp"],
            pp=row["pp"],
            ep=row["ep"],
            etp=row["etp"],
            micro_batch=row["micro_batch_size"],
            global_batch=256,
            seq_len=4096,
        )
    )
    assert capsys.readouterr().out.strip() == want


def test_estimate_and_plan_take_moe_models(capsys):
    from distlab import training

    args = ["--model", "mixtral-8x7b", "--gpus", "32", "--global-batch", "256", "--seq", "4096"]
    assert cli.main(["estimate", *args, "--tp", "2", "--sequence-parallel", "--ep", "8", "--etp", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    want = training.estimate(
        "mixtral-8x7b",
        "dgx-h100",
        nodes=4,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=4096,
        tp=2,
        sequence_parallel=True,
        ep=8,
        etp=1,
    )
    assert data["step_time_s"] == want.step_time_s and data["breakdown_s"]["ep_comm"] == want.ep_comm_s > 0
    assert (data["ep"], data["etp"]) == (8, 1)
    assert cli.main(["estimate", *args, "--ep", "3"]) == 2
    assert "valid ep: 1, 2, 4, 8" in capsys.readouterr().err
    assert cli.main(["plan", *args, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "ep etp" in out and "configurations of mixtral-8x7b on 32 GPUs" in out
