"""distlab.export: each engine's output parses back (shlex / json / tomllib) to the same degrees;
settings an engine cannot express raise our error."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import given, settings, strategies as st

from distlab import export, training
from distlab.errors import ConfigurationError

# Llama-3.1-70B (80 layers, 64 heads) on 4 DGX H100 nodes = 32 GPUs, batch 64
def est(**kw):
    base = dict(global_batch=64, seq_len=2048, tp=2, pp=2, micro_batch_size=1, zero=1, recompute="selective",
                sequence_parallel=True)
    return training.estimate("llama3.1-70b", "dgx-h100", nodes=4, fabric="ib-ndr", **{**base, **kw})


def test_megatron_line_by_hand():
    e = est(pp=4, chunks=5, schedule="interleaved", recompute="full")
    text = export.megatron(e)
    # 32 GPUs = 4 nodes x 8; dp = 32 / (2 x 4) = 4; 80 layers / (pp 4 x v 5) = 4 layers per virtual stage
    assert text.startswith("torchrun --nnodes 4 --nproc-per-node 8 pretrain_gpt.py")
    for flag in ("--tensor-model-parallel-size 2", "--pipeline-model-parallel-size 4",
                 "--num-layers-per-virtual-pipeline-stage 4", "--micro-batch-size 1", "--global-batch-size 64",
                 "--seq-length 2048", "--sequence-parallel", "--recompute-granularity full",
                 "--recompute-method uniform", "--recompute-num-layers 1", "--use-distributed-optimizer", "--bf16"):
        assert flag in text
    back = export.parse_megatron(text)
    assert (back["dp"], back["tp"], back["pp"], back["chunks"]) == (4, 2, 4, 5)


def test_megatron_has_no_zero_2_or_3():
    for z in (2, 3):
        with pytest.raises(ConfigurationError, match="no ZeRO-2/3 flag.*deepspeed.*torchtitan"):
            export.megatron(est(zero=z))
    assert "--use-distributed-optimizer" not in export.megatron(est(zero=0))


def test_deepspeed_batch_identity_by_hand():
    # dp = 32 / (2 x 2) = 8, micro-batch 2: 64 = 2 x accumulation x 8 -> accumulation 4
    cfg = json.loads(export.deepspeed(est(micro_batch_size=2, pp=1, tp=2, zero=2)))
    # pp = 1: dp = 16, 64 = 2 x 2 x 16
    assert cfg["train_batch_size"] == 64
    assert cfg["train_micro_batch_size_per_gpu"] == 2 and cfg["gradient_accumulation_steps"] == 2
    assert cfg["zero_optimization"] == {"stage": 2} and cfg["bf16"] == {"enabled": True}
    assert cfg["tensor_parallel"] == {"autotp_size": 2} and "pipeline" not in cfg


def test_deepspeed_rejects_what_its_engines_cannot_run():
    with pytest.raises(ConfigurationError, match="incompatible with pipeline parallelism"):
        export.deepspeed(est(zero=2))  # pp = 2
    with pytest.raises(ConfigurationError, match="1F1B"):
        export.deepspeed(est(pp=4, chunks=5, schedule="interleaved"))
    with pytest.raises(ConfigurationError, match="AutoTP"):
        export.deepspeed(est(pp=1, zero=3))


def test_torchtitan_zero_mapping_and_sections():
    doc = tomllib.loads(export.torchtitan(est(zero=3, pp=4, chunks=2, schedule="interleaved")))
    par = doc["parallelism"]
    # ZeRO-3 = FSDP over dp = 32 / 8 = 4; 80 layers / (4 x 2) = 10 per stage
    assert par["data_parallel_shard_degree"] == 4 and par["data_parallel_replicate_degree"] == 1
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B" and par["pipeline_parallel_layers_per_stage"] == 10
    assert doc["training"] == {"local_batch_size": 16, "global_batch_size": 64, "seq_len": 2048}
    assert doc["activation_checkpoint"] == {"mode": "selective"}
    plain = tomllib.loads(export.torchtitan(est(zero=0, pp=1)))["parallelism"]
    assert plain["data_parallel_replicate_degree"] == 16 and plain["data_parallel_shard_degree"] == 1
    for z in (1, 2):
        with pytest.raises(ConfigurationError, match="no ZeRO-1/2"):
            export.torchtitan(est(zero=z))


def test_unknown_format_and_non_estimate():
    with pytest.raises(ConfigurationError, match="valid: megatron, deepspeed, torchtitan"):
        export.export(est(), "nemo")
    with pytest.raises(ConfigurationError):
        export.megatron({"tp": 2})


configs = st.fixed_dictionaries(dict(
    tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), b=st.sampled_from([1, 2]),
    zero=st.integers(0, 3), recompute=st.sampled_from(["none", "selective", "full"]),
    schedule=st.sampled_from(["gpipe", "1f1b", "interleaved"]), chunks=st.sampled_from([1, 2, 5])))


@settings(max_examples=60, deadline=None)
@given(configs)
def test_every_export_round_trips_to_the_same_degrees(c):
    kw = dict(tp=c["tp"], pp=c["pp"], micro_batch_size=c["b"], zero=c["zero"], recompute=c["recompute"],
              schedule=c["schedule"], chunks=c["chunks"] if c["schedule"] == "interleaved" else 1,
              sequence_parallel=c["tp"] > 1)
    try:
        e = est(**kw)
    except ConfigurationError:
        return  # not a valid configuration (e.g. microbatches not a multiple of pp when interleaved)
    dp, b, m = e.config["dp"], e.config["micro_batch_size"], e.microbatches
    for fmt in export.FORMATS:
        try:
            text = export.export(e, fmt)
        except ConfigurationError:
            continue  # the engine cannot express it, and said so
        if fmt == "megatron":
            back = export.parse_megatron(text)
            assert (back["dp"], back["tp"], back["pp"], back["chunks"], back["zero"]) == (dp, c["tp"], c["pp"],
                                                                                         e.config["chunks"], c["zero"])
            assert back["micro_batch_size"] == b and back["global_batch"] == 64
        elif fmt == "deepspeed":
            cfg = json.loads(text)
            assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * dp
            assert cfg["gradient_accumulation_steps"] == m and cfg["zero_optimization"]["stage"] == c["zero"]
            assert cfg.get("pipeline", {"stages": 1})["stages"] == c["pp"]
            assert cfg.get("tensor_parallel", {"autotp_size": 1})["autotp_size"] == c["tp"]
        else:
            par = tomllib.loads(text)["parallelism"]
            assert par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] == dp
            assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"]) == (c["tp"], c["pp"])
            assert tomllib.loads(text)["training"]["local_batch_size"] * dp == 64
