"""`distlab export` plans and checks with the engine's own memory recipe (issue 30): it never writes a layout
that the recipe of the engine it writes for refuses, and --memory-recipe can only name one of that engine's."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import cli, export, hardware, training
from cli_exported import exported

LESSON7 = ["--model", "llama3.1-70b", "--gpus", "256", "--global-batch", "256", "--seq", "8192"]


def _recheck_megatron(text, model, nodes, global_batch, seq):
    """Read the written Megatron line back and price it again with Megatron's recipe for its ZeRO stage and
    gradient precision: independent of how export chose it."""
    back = export.parse_megatron(text)
    family = "megatron-bf16-grads" if back["grad_reduce_in_bf16"] else None
    recipe = export.engine_recipe("megatron", back["zero"], family)
    return training.estimate(
        model,
        hardware.cluster("dgx-h100", nodes, "ib-ndr"),
        global_batch=global_batch,
        seq_len=seq,
        dp=back["dp"],
        tp=back["tp"],
        cp=back["cp"],
        pp=back["pp"],
        chunks=back["chunks"],
        micro_batch_size=back["micro_batch_size"],
        zero=back["zero"],
        recompute=back["recompute"],
        sequence_parallel=back["sequence_parallel"],
        schedule="interleaved" if back["chunks"] > 1 else "1f1b",
        memory_recipe=recipe,
    )


def test_best_megatron_line_fits_megatrons_own_recipe(capsys):
    """The issue's case: lesson 7's scenario. Planned with the 16 B/parameter teaching count, --best wrote
    dp 16 x tp 4 x cp 2 x pp 2 (v 20), ZeRO-1, no recompute: with --use-distributed-optimizer Megatron keeps
    6 + 12/16 = 6.75 B per parameter, not 2 + 2 + 12/16 = 4.75, and the layout needed 79.3 GB of the 78 GB
    usable. Read back and re-priced with Megatron's recipe, the written line must fit."""
    assert cli.main(["export", "--format", "megatron", "--best", *LESSON7]) == 0
    est = _recheck_megatron(capsys.readouterr().out, "llama3.1-70b", 32, 256, 8192)
    assert est.feasible, est.explain()


def test_bf16_gradients_write_megatrons_switch_and_fit_with_it(capsys):
    assert (
        cli.main(["export", "--format", "megatron", "--best", "--memory-recipe", "megatron-bf16-grads", *LESSON7]) == 0
    )
    text = capsys.readouterr().out
    assert "--grad-reduce-in-bf16" in text
    assert _recheck_megatron(text, "llama3.1-70b", 32, 256, 8192).feasible


def test_bf16_gradient_recipe_bytes_by_hand():
    """Distributed optimizer with bf16 gradients on d = 8: 2 (bf16 weights) + 2 (bf16 gradients) + 12/8
    (fp32 main weights and Adam, sharded) = 5.5 B per parameter; fp32 gradients: 6 + 12/8 = 7.5."""
    from distlab.memory_recipes import memory_recipe, recipe_state_bytes_array

    for name, per_param in (
        ("megatron-distributed-optimizer-bf16-grads", 5.5),
        ("megatron-distributed-optimizer", 7.5),
    ):
        w, g, o = recipe_state_bytes_array(memory_recipe(name), 7e9, 0, 0, 1, 8)
        assert float(w + g + o) / 7e9 == pytest.approx(per_param)


@pytest.mark.parametrize(
    "fmt, recipe, words",
    [
        ("torchtitan", "megatron", "is not what torchtitan keeps per parameter"),
        ("megatron", "fsdp2", "valid for megatron: megatron, megatron-bf16-grads"),
        # Composer / llm-foundry's FSDP1 has no exporter: torchtitan names the one recipe it runs
        ("torchtitan", "fsdp1", "valid for torchtitan: fsdp2 (or leave it out"),
        ("deepspeed", "megatron-distributed-optimizer", "valid for deepspeed: deepspeed"),
    ],
)
def test_a_recipe_of_another_engine_is_refused_by_name(fmt, recipe, words, capsys):
    assert cli.main(["export", "--format", fmt, "--best", "--memory-recipe", recipe, *LESSON7]) == 2
    assert words in capsys.readouterr().err


def test_a_given_layout_over_the_engines_recipe_is_refused(capsys):
    """A layout (ZeRO-1, no recompute) that fits the teaching count (the planner's default), not Megatron's
    distributed optimizer. The layout --best wrote before (dp 16, cp 2) now fits both (79.3 GB of the H100's
    84.9 GB less 2 GB); dp 32 without cp doubles the activations per GPU: 84.7 GB of 84.9 under the teaching count,
    102 GB under Megatron's 6 + 12 / d bytes per parameter."""
    layout = ["--dp", "32", "--tp", "4", "--cp", "1", "--pp", "2", "--chunks", "20", "--schedule", "interleaved"]
    layout += ["--micro-batch-size", "1", "--zero", "1", "--recompute", "none", "--sequence-parallel"]
    fits_teaching = training.estimate(
        "llama3.1-70b",
        "dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        dp=32,
        tp=4,
        cp=1,
        pp=2,
        chunks=20,
        schedule="interleaved",
        micro_batch_size=1,
        zero=1,
        recompute="none",
        sequence_parallel=True,
    )
    assert fits_teaching.feasible
    assert cli.main(["export", "--format", "megatron", *LESSON7, *layout]) == 2
    err = capsys.readouterr().err
    assert "memory recipe 'megatron-distributed-optimizer'" in err and "over" in err


MODELS = ("llama2-7b", "llama3.1-8b", "llama2-13b", "llama3.1-70b")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model=st.sampled_from(MODELS),
    nodes=st.sampled_from((1, 2, 4, 8, 16)),
    global_batch=st.sampled_from((32, 128, 512)),
    seq=st.sampled_from((2048, 4096, 8192)),
    fmt=st.sampled_from(export.FORMATS),
    bf16_grads=st.booleans(),
)
def test_export_best_never_writes_a_layout_its_engines_recipe_refuses(
    monkeypatch, capsys, model, nodes, global_batch, seq, fmt, bf16_grads
):
    recipe = ["--memory-recipe", "megatron-bf16-grads"] if fmt == "megatron" and bf16_grads else []
    argv = ["export", "--format", fmt, "--best", "--model", model, "--gpus", str(8 * nodes)]
    argv += ["--global-batch", str(global_batch), "--seq", str(seq), *recipe]
    with monkeypatch.context() as m:
        code, seen = exported(m, argv)
    out, err = capsys.readouterr()
    if code != 0:  # nothing fits, or nothing the engine can express: our error, naming the engine's recipes
        assert code == 2 and "Traceback" not in err and f"{fmt}'s memory recipes" in err
        return
    est = seen[-1]
    family = recipe[1] if recipe else None
    assert est.config["memory_recipe"] == export.engine_recipe(fmt, est.config["zero"], family)
    assert est.feasible, est.explain()
    if fmt == "megatron":
        assert _recheck_megatron(out, model, nodes, global_batch, seq).feasible


#: Megatron Bridge 25.11's GB200 Llama 3 70B recipe (published_runs.json, mbridge-25.11-gb200-llama3-70b-64gpu-fp8cs):
#: Megatron-FSDP on 64 GPUs, micro-batch 2, no recompute, 40 of the 80 layers' activations offloaded to Grace
GB200_70B = ["--model", "llama3.1-70b", "--node", "gb200-nvl72", "--gpus", "64", "--global-batch", "256"]
GB200_70B += ["--seq", "8192", "--tp", "1", "--pp", "1", "--zero", "3", "--micro-batch-size", "2"]
GB200_70B += ["--recompute", "none", "--precision", "fp8", "--memory-recipe", "megatron-fsdp"]


def test_a_given_layout_with_offloaded_activations_is_written_with_megatrons_flag(monkeypatch, capsys):
    # without the 40 offloaded layers the layout needs 203 GB of the GB200's 186 (the row's recorded reason), so the
    # export refuses it; with them it fits, and the line carries --cpu-offloading-num-layers 40 (Megatron-LM d98e8a6
    # has no --cpu-offloading flag: validate_args sets it from N > 0), which parse_megatron reads back
    assert cli.main(["export", "--format", "megatron", *GB200_70B]) == 2
    assert "cannot run with megatron's memory recipe" in capsys.readouterr().err
    code, seen = exported(
        monkeypatch, ["export", "--format", "megatron", *GB200_70B, "--activation-offload-layers", "40"]
    )
    text = capsys.readouterr().out
    assert code == 0 and seen[-1].feasible and seen[-1].config["activation_offload_layers"] == 40
    assert "--cpu-offloading-num-layers 40" in text and export.parse_megatron(text)["activation_offload_layers"] == 40


@pytest.mark.parametrize(
    "extra",
    [["--best"], ["--format", "deepspeed", "--memory-recipe", "deepspeed"], ["--node", "dgx-h100", "--gpus", "64"]],
    ids=["best", "deepspeed", "no-host-link"],
)
def test_offloaded_activations_are_refused_where_they_cannot_be_written(extra, capsys):
    # the planner does not search offloading (--best); DeepSpeed's JSON cannot express Megatron's offloading; a DGX H100
    # has no sourced host link: each is our one-line error naming the flag or the parameter, never a traceback
    argv = ["export", "--format", "megatron", *GB200_70B, "--activation-offload-layers", "40", *extra]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert ("--activation-offload-layers" in err or "activation_offload_layers=40" in err) and "Traceback" not in err
