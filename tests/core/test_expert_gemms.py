"""distlab.expert_gemms: an MoE layer's expert GEMMs on one GPU run one at a time, up to 4 at once on CUDA streams, or
in one grouped launch; the GEMMs running at once share the SMs' waves. Checked by hand, by invariants of the wave
model, and through estimate, plan and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import cli, expert_gemms, models, planner, training
from distlab.efficiency import gemm_shape_factor_array, layer_gemm_slowdown_array
from distlab.errors import ConfigurationError
from distlab.moe import step as moe_step

A100_RIDGE = 271.2e12 / 2.039e12  # the best-shape GEMM rate (MAMF) over HBM bandwidth: 133.0 FLOP/B
H100_RIDGE = 794.5e12 / 3.35e12  # 237.2 FLOP/B
MIXTRAL_BRIEF = dict(
    cluster="dgx-a100",
    nodes=16,
    fabric="ib-hdr",
    global_batch=1024,
    seq_len=4096,
    memory_recipe="megatron-distributed-optimizer",
    zero=1,
    recompute="selective",
    sequence_parallel=True,
)


def test_mixtral_expert_gemm_by_hand():
    """Mixtral 8x7B's gated expert up projection with tp 8 and ep 1 on an A100 (108 SMs): 4,096 tokens x top 2 / 8
    experts = 1,024 tokens per expert, n = 2 x 14,336 / 8 = 3,584, k = 4,096.

    One at a time: 256 x 128 tiles, 4 x 28 = 112 tiles = 2 waves of 108: 1024 x 3584 / (2 x 108 x 32,768) = 0.5185;
    128 x 128: 8 x 28 = 224 = 3 waves, 3,670,016 / (3 x 108 x 16,384) = 0.691 x 0.75 = 0.5185; 128 x 64: 448 tiles =
    5 waves, 0.830 x 0.5 = 0.415. Best 3,670,016 / 7,077,888.
    Four at once (multi-stream): 256 x 128: 448 tiles = 5 waves (540 slots), 4 x 3,670,016 / (5 x 108 x 32,768) =
    0.8296; 128 x 128: 896 = 9 waves, 0.922 x 0.75 = 0.691; 128 x 64: 1,792 = 17 waves, 0.976 x 0.5 = 0.488. Best
    14,680,064 / 17,694,720. The roofline (667 FLOP/B against 133) does not bind."""
    one = gemm_shape_factor_array(1024, 3584, 4096, 108, A100_RIDGE)
    four = gemm_shape_factor_array(1024, 3584, 4096, 108, A100_RIDGE, 4)
    assert float(one) == pytest.approx(3_670_016 / 7_077_888, rel=1e-12)
    assert float(four) == pytest.approx(14_680_064 / 17_694_720, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 20_000),
    columns=st.integers(1, 64),
    k=st.integers(1, 20_000),
    groups=st.integers(1, 64),
    sms=st.sampled_from([108, 132, 148, 160]),
)
def test_g_gemms_at_once_fill_the_waves_of_one_g_times_wider_gemm(m, columns, k, groups, sms):
    """Invariant of the wave model: G GEMMs of m x n at once quantise like one GEMM of m x G n, where n is a whole
    number of every tile's width (256), and with no roofline (a ridge so low it never binds)."""
    n = 256 * columns
    together = gemm_shape_factor_array(m, n, k, sms, 1e-9, groups)
    wide = gemm_shape_factor_array(m, groups * n, k, sms, 1e-9)
    assert float(together) == pytest.approx(float(wide), rel=1e-12)


@pytest.mark.parametrize("tokens", [256, 1024, 4096, 16384])
@pytest.mark.parametrize("ep", [1, 2, 4, 8])
def test_more_gemms_at_once_never_slower_and_one_expert_per_gpu_unchanged(tokens, ep):
    view = moe_step.step_model("mixtral-8x7b", 4096)
    slow = {
        choice: float(layer_gemm_slowdown_array(view, tokens, 1, 132, H100_RIDGE, ep=ep, expert_gemm=choice)[0])
        for choice in expert_gemms.EXPERT_GEMM_NAMES
    }
    assert slow["sequential"] >= slow["multi-stream"] >= slow["grouped"] >= 1.0
    if ep == 8:  # one expert per GPU: nothing runs beside it
        assert slow["sequential"] == slow["multi-stream"] == slow["grouped"]
    if 8 // ep <= 4:  # at most 4 experts on the GPU: the 4 streams hold them all
        assert slow["multi-stream"] == slow["grouped"]


def test_a_dense_model_has_no_experts_to_run():
    model = models.model("llama3.1-8b")
    got = {
        c: layer_gemm_slowdown_array(model, 4096, 2, 132, H100_RIDGE, expert_gemm=c)
        for c in expert_gemms.EXPERT_GEMM_NAMES
    }
    assert len({(float(a), float(b)) for a, b in got.values()}) == 1
    kw = dict(nodes=1, fabric="ib-ndr", global_batch=8, seq_len=4096, memory_recipe="megatron")
    plain = training.estimate("llama3.1-8b", "dgx-h100", **kw)
    grouped = training.estimate("llama3.1-8b", "dgx-h100", expert_gemm="grouped", **kw)
    assert plain.step_time_s == grouped.step_time_s
    assert "expert_gemm" not in plain.config


@pytest.mark.parametrize(
    "recipe, expected",
    [
        ("megatron-distributed-optimizer", "multi-stream"),
        ("fsdp2", "grouped"),
        ("deepspeed", "sequential"),
        ("zero-paper", "sequential"),
    ],
)
def test_each_engine_prices_its_own_expert_gemms_and_says_so(recipe, expected):
    kw = dict(MIXTRAL_BRIEF, memory_recipe=recipe, tp=8)
    kw["zero"] = {"fsdp2": 3, "deepspeed": 1, "zero-paper": 1}.get(recipe, 1)
    est = training.estimate("mixtral-8x7b", **kw)
    assert est.config["expert_gemm"] == expected
    assert est.compute_model.expert_gemm == expected
    assert expert_gemms.note(expected) in est.notes()
    named = training.estimate("mixtral-8x7b", expert_gemm=expected, **kw)
    assert named.step_time_s == est.step_time_s


def test_the_dense_habit_gains_from_its_experts_at_once():
    """tp 8 with every expert on every GPU (8 small expert GEMMs per layer) is where running them at once matters;
    with ep 8 each GPU holds one expert and the choice changes nothing."""
    habit = {
        c: training.estimate("mixtral-8x7b", tp=8, expert_gemm=c, **MIXTRAL_BRIEF).compute_s
        for c in expert_gemms.EXPERT_GEMM_NAMES
    }
    assert habit["sequential"] > habit["multi-stream"] > habit["grouped"]
    spread = {
        c: training.estimate("mixtral-8x7b", tp=4, ep=8, expert_gemm=c, **MIXTRAL_BRIEF).compute_s
        for c in expert_gemms.EXPERT_GEMM_NAMES
    }
    assert len(set(spread.values())) == 1


def test_the_planner_prices_the_same_choice_as_estimate():
    kw = {k: v for k, v in MIXTRAL_BRIEF.items() if k not in ("zero", "recompute", "sequence_parallel")}
    p = planner.plan("mixtral-8x7b", expert_gemm="sequential", **kw)
    assert p.extra["expert_gemm"] == "sequential"
    row = p.row(0)
    layout = {k: row[k] for k in ("dp", "tp", "pp", "cp", "ep", "etp", "zero", "recompute", "sequence_parallel")}
    layout.update(chunks=row["chunks"], micro_batch_size=row["micro_batch_size"], schedule=row["schedule"])
    est = training.estimate("mixtral-8x7b", expert_gemm="sequential", **dict(MIXTRAL_BRIEF, **layout))
    assert est.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
    assert planner.plan("mixtral-8x7b", **kw).extra["expert_gemm"] == "multi-stream"
    assert planner.plan("llama3.1-8b", "dgx-h100", nodes=1, global_batch=8).extra["expert_gemm"] is None


@pytest.mark.parametrize("bad", ["", "fused", 1, "grouped-gemm"])
def test_a_bad_choice_is_our_error_naming_the_valid_ones(bad):
    with pytest.raises(ConfigurationError, match="expert_gemm=.*valid: sequential, multi-stream, grouped"):
        training.estimate("mixtral-8x7b", tp=8, expert_gemm=bad, **MIXTRAL_BRIEF)
    with pytest.raises(ConfigurationError, match="local_experts"):
        expert_gemms.concurrent_experts("grouped", float("nan"))


def test_the_cli_takes_the_choice_and_refuses_a_bad_one(capsys):
    base = ["estimate", "--model", "mixtral-8x7b", "--node", "dgx-a100", "--gpus", "128", "--fabric", "ib-hdr"]
    base += ["--global-batch", "1024", "--seq-len", "4096", "--tp", "8", "--sequence-parallel"]
    assert cli.main(base + ["--expert-gemm", "grouped", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["expert_gemm"] == "grouped"
    assert cli.main(base + ["--expert-gemm", "Sequential"]) == 0
    assert "experts: one GEMM per expert" in capsys.readouterr().out
    assert cli.main(base + ["--expert-gemm", "fast"]) != 0
    err = capsys.readouterr().err
    assert "--expert-gemm 'fast'; valid: sequential, multi-stream, grouped" in err
    assert "Traceback" not in err


def test_concurrent_experts_broadcasts():
    got = expert_gemms.concurrent_experts("multi-stream", np.array([0.5, 2.0, 16.0]))
    assert got.tolist() == [1.0, 2.0, 4.0]


def test_the_export_writes_the_expert_gemms_it_priced_or_refuses():
    """Megatron's export writes --moe-grouped-gemm for its own 'multi-stream' (the default) and leaves it out for
    'sequential'; torchtitan's MoE always groups, DeepSpeed-MoE always loops: asked for another, our error names
    what the format runs (distlab.moe.export.FORMAT_EXPERT_GEMMS)."""
    from distlab import moe

    def flags(**kw):
        return moe.megatron_moe_flags(moe.moe_config("mixtral-8x7b", 64, ep=8, global_batch=256, **kw))

    assert "--moe-grouped-gemm" in flags() and "--moe-grouped-gemm" in flags(expert_gemm="multi-stream")
    assert "--moe-grouped-gemm" not in flags(expert_gemm="Sequential")
    mixtral = dict(model="mixtral-8x7b", gpus=64, ep=8, global_batch=256)
    deepseek = dict(model="deepseek-v3", gpus=256, pp=8, ep=32, etp=1, global_batch=512)  # torchtitan's flavor
    for fmt, refused, kw in (
        ("megatron", "grouped", mixtral),
        ("torchtitan", "sequential", deepseek),
        ("deepspeed", "multi-stream", mixtral),
    ):
        runs = " or ".join(repr(r) for r in moe.export.FORMAT_EXPERT_GEMMS[fmt])
        with pytest.raises(ConfigurationError, match=f"expert_gemm='{refused}': the {fmt} export runs .*{runs}"):
            moe.export_moe(moe.moe_config(**kw, expert_gemm=refused), fmt)
        assert moe.export_moe(moe.moe_config(**kw), fmt)
    with pytest.raises(ConfigurationError, match="expert_gemm="):
        moe.moe_config("mixtral-8x7b", 64, ep=8, expert_gemm="fast")


def test_each_formats_own_expert_gemms_are_its_engines_default():
    """What each export format runs first is what its engine's memory recipe prices by default, so --best plans the
    expert GEMMs it then writes (distlab.export.engine_recipes: the recipes each format plans with)."""
    from distlab import export, moe

    for fmt, runs in moe.export.FORMAT_EXPERT_GEMMS.items():
        for recipe in export.engine_recipes(fmt, None):
            assert expert_gemms.default_expert_gemm(recipe) == runs[0], (fmt, recipe)
