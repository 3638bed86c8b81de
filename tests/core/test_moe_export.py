"""MoE configurations as engine input (Lesson 10 §7): every output parses back to the same configuration,
and what an engine cannot express raises our error."""

from __future__ import annotations

import json
import shlex

import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import moe
from distlab.errors import ConfigurationError, DistlabError


def _flags(text: str) -> dict:
    words = shlex.split(text.replace("\\\n", " "))
    out, key = {}, None
    for word in words[words.index("pretrain_gpt.py") + 1 :]:
        if word.startswith("--"):
            key = word
            out[key] = True
        else:
            out[key] = word
    return out


def test_deepseek_v3_run_as_megatron_flags():
    # DeepSeek-V3 report Sec. 3.2: 2048 H800 GPUs, PP 16, EP 64 over 8 nodes, each token to at most 4 nodes
    c = moe.moe_config("deepseek-v3", 2048, pp=16, ep=64, global_batch=15360, max_nodes=4)
    f = _flags(moe.megatron_moe(c))
    assert f["--num-experts"] == "256" and f["--moe-router-topk"] == "8" and f["--moe-ffn-hidden-size"] == "2048"
    assert f["--expert-model-parallel-size"] == "64" and f["--pipeline-model-parallel-size"] == "16"
    assert f["--moe-shared-expert-intermediate-size"] == "2048"
    assert eval(f["--moe-layer-freq"]) == [0] * 3 + [1] * 58  # Megatron evaluates the list expression
    assert f["--moe-router-num-groups"] == "8" and f["--moe-router-group-topk"] == "4"
    assert f["--multi-latent-attention"] is True and f["--kv-lora-rank"] == "512" and f["--q-lora-rank"] == "1536"
    assert "--sequence-parallel" not in f  # tp = 1
    # ZeRO-1, as the step model prices it: the gradient reduce-scatter under the backward and the parameter
    # all-gather under the next forward, both off in Megatron-LM unless given (arguments.py: store_true)
    assert f["--use-distributed-optimizer"] is True
    assert f["--overlap-grad-reduce"] is True and f["--overlap-param-gather"] is True


def test_mixtral_with_tp_gets_sequence_parallel_and_capacity():
    c = moe.moe_config("mixtral-8x7b", 64, tp=2, ep=8, etp=1, capacity_factor=1.25, global_batch=256)
    f = _flags(moe.megatron_moe(c))
    assert f["--sequence-parallel"] is True and f["--expert-tensor-parallel-size"] == "1"
    assert f["--moe-expert-capacity-factor"] == "1.25" and f["--moe-pad-expert-input-to-capacity"] is True
    assert f["--group-query-attention"] is True and f["--num-query-groups"] == "8"
    assert "--moe-layer-freq" not in f  # every layer is MoE


def test_qwen3_head_dim_and_qk_norm():
    f = _flags(moe.megatron_moe(moe.moe_config("qwen3-235b-a22b", 64, ep=8)))
    assert f["--kv-channels"] == "128" and f["--qk-layernorm"] is True  # 64 heads x 128 != 4096


def test_torchtitan_parses_back():
    c = moe.moe_config("deepseek-v3", 256, pp=8, ep=32, etp=1, global_batch=512)
    t = tomllib.loads(moe.torchtitan_moe(c))
    assert t["model"] == {"name": "deepseek_v3", "flavor": "671B"}
    p = t["parallelism"]
    assert (p["data_parallel_shard_degree"], p["expert_parallel_degree"], p["pipeline_parallel_degree"]) == (32, 32, 8)
    assert t["training"]["local_batch_size"] * p["data_parallel_shard_degree"] == 512


def test_deepspeed_arguments():
    d = json.loads(moe.export_moe(moe.moe_config("mixtral-8x7b", 16, ep=8, capacity_factor=1.0), "deepspeed"))
    assert d == {
        "hidden_size": 4096,
        "num_experts": 8,
        "ep_size": 8,
        "k": 2,
        "capacity_factor": 1.0,
        "drop_tokens": True,
        "use_residual": False,
        "enable_expert_tensor_parallelism": False,
    }


@pytest.mark.parametrize(
    "build, fmt, words",
    [
        (lambda: moe.moe_config("gpt-oss-120b", 64, ep=8), "megatron", "attention sinks"),
        (lambda: moe.moe_config("mixtral-8x7b", 64, ep=8), "torchtitan", "no flavor of mixtral-8x7b"),
        (lambda: moe.moe_config("deepseek-v3", 256, tp=4, pp=4, ep=8, etp=2), "torchtitan", "etp=2"),
        (lambda: moe.moe_config("deepseek-v3", 256, pp=8, ep=32), "deepspeed", "shared expert"),
        (lambda: moe.moe_config("mixtral-8x7b", 64, ep=8, capacity_factor=1.0), "torchtitan", "no flavor"),
    ],
)
def test_what_an_engine_cannot_express_raises_our_error(build, fmt, words):
    with pytest.raises(ConfigurationError, match=words):
        moe.export_moe(build(), fmt)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(gpus=64, ep=3), "etp x ep x pp"),
        (dict(gpus=48, ep=3), "ep=3 does not divide the 8 experts"),
        (dict(gpus=64, ep=8, max_nodes=2), "max_nodes=2 is more than the 1 node"),
        (dict(gpus=64, ep=8, global_batch=100), "not a multiple"),
    ],
)
def test_invalid_configurations(kwargs, words):
    with pytest.raises(ConfigurationError, match=words):
        moe.moe_config("mixtral-8x7b", **kwargs)


@settings(max_examples=50, deadline=None)
@given(
    gpus=st.integers(-1, 512),
    tp=st.integers(0, 8),
    pp=st.integers(0, 8),
    ep=st.integers(0, 64),
    etp=st.one_of(st.none(), st.integers(0, 4)),
    cf=st.one_of(st.none(), st.floats(-1, 3)),
    m=st.one_of(st.none(), st.integers(0, 8)),
    name=st.sampled_from(sorted(moe.MOE_MODELS)),
    fmt=st.sampled_from(moe.FORMATS + ("nope",)),
)
def test_fuzz_config_and_export(gpus, tp, pp, ep, etp, cf, m, name, fmt):
    try:
        text = moe.export_moe(
            moe.moe_config(name, gpus, tp=tp, pp=pp, ep=ep, etp=etp, capacity_factor=cf, max_nodes=m), fmt
        )
    except DistlabError:
        return
    assert isinstance(text, str) and text
