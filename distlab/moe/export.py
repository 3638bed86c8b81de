"""An MoE configuration as engine input: Megatron-LM flags, a torchtitan TOML, DeepSpeed-MoE layer arguments.

`MoEConfig` holds what an engine needs beyond the model: GPUs, tp, pp, ep, etp, batch, capacity factor
and node limit, checked against the rules of distlab.moe.expert_groups and distlab.mesh.expert_layout.
Each exporter writes what its engine reads, or raises ConfigurationError naming what it cannot express
and which engine can. Lesson 10 §7.

Megatron-LM (flags from TransformerConfig / MLATransformerConfig fields through arguments.py; MoE docs
megatron/core/transformer/moe/README.md): --num-experts, --moe-ffn-hidden-size, --moe-router-topk,
--expert-model-parallel-size, --expert-tensor-parallel-size, --moe-shared-expert-intermediate-size,
--moe-layer-freq (a Python list expression: 0 dense, 1 MoE), --moe-token-dispatcher-type alltoall,
--moe-grouped-gemm, --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity (token drop
and padding), --moe-router-num-groups / --moe-router-group-topk (group-limited routing: groups = the nodes
an EP group spans, DeepSeek-V3's node-limited routing), --multi-latent-attention --q-lora-rank
--kv-lora-rank --qk-head-dim --qk-pos-emb-head-dim --v-head-dim, --qk-layernorm, --sequence-parallel
(required with MoE when tp > 1), --use-distributed-optimizer. Left to the user: the router's score
function and balancing (--moe-router-score-function, --moe-router-load-balancing-type,
--moe-router-enable-expert-bias, --moe-aux-loss-coeff), which the catalog does not record.

torchtitan (torchtitan/config job config, Parallelism: expert_parallel_degree, expert_tensor_parallel_degree;
"etp is either 1 or the same as tp"; token-choice routing without capacity): a TOML for the catalog
models that have a torchtitan flavor (DeepSeek-V3: model deepseek_v3, flavor 671B).

DeepSpeed-MoE (deepspeed/moe/layer.py, class MoE): the layer's constructor arguments hidden_size,
num_experts, ep_size, k, capacity_factor, drop_tokens, enable_expert_tensor_parallelism; it has no shared
experts (use_residual is PR-MoE's residual MLP with a learned mix, not a shared expert) and no
node-limited routing.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass

from .. import mesh
from .._arguments import whole_number
from ..errors import ConfigurationError
from ..expert_gemms import expert_gemm as expert_gemm_name
from ..export.megatron_lm import megatron_dp_overlap_flags
from .._words import counted
from .catalog import MoEModel
from .catalog import model as moe_model
from .all_to_all import ep_members_per_node
from .capacity import MAX_GPUS, MAX_SEQ_LEN, MAX_TOKENS, expert_capacity
from .cost import expert_groups

__all__ = [
    "FORMATS",
    "FORMAT_EXPERT_GEMMS",
    "TORCHTITAN_FLAVORS",
    "MoEConfig",
    "moe_config",
    "megatron_moe_flags",
    "megatron_moe",
    "torchtitan_moe",
    "deepspeed_moe",
    "export_moe",
]

FORMATS = ("megatron", "torchtitan", "deepspeed")
#: The expert GEMMs each format's engine can run (distlab.expert_gemms), its own first: Megatron-LM with
#: --moe-grouped-gemm (Transformer Engine's GroupedLinear on 4 streams) or without it (SequentialMLP; one CUTLASS
#: grouped kernel needs NVTE_USE_CUTLASS_GROUPED_GEMM=1 on Hopper, which the export does not set); torchtitan's MoE
#: always calls torch._grouped_mm; DeepSpeed-MoE loops over its experts.
FORMAT_EXPERT_GEMMS = {
    "megatron": ("multi-stream", "sequential"),
    "torchtitan": ("grouped",),
    "deepspeed": ("sequential",),
}
#: catalog MoE model -> torchtitan (model.name, model.flavor) (torchtitan/models/deepseek_v3/__init__.py).
TORCHTITAN_FLAVORS = {"deepseek-v3": ("deepseek_v3", "671B")}


@dataclass(frozen=True)
class MoEConfig:
    """A validated MoE training configuration (plain values); build with moe_config()."""

    model: MoEModel
    gpus: int
    tp: int
    pp: int
    ep: int
    etp: int
    dp: int
    edp: int
    micro_batch: int
    global_batch: int
    seq_len: int
    capacity_factor: float | None
    max_nodes: int | None
    gpus_per_node: int
    expert_gemm: str | None = None  # how the experts' GEMMs run (distlab.expert_gemms); None: the format's own

    @property
    def ep_nodes(self) -> int:
        """Nodes one EP group spans."""
        return self.ep // ep_members_per_node(etp=self.etp, ep=self.ep, gpus_per_node=self.gpus_per_node)


def moe_config(
    model,
    gpus,
    *,
    tp=1,
    pp=1,
    ep=1,
    etp=None,
    micro_batch=1,
    global_batch=None,
    seq_len=None,
    capacity_factor=None,
    max_nodes=None,
    gpus_per_node=8,
    expert_gemm=None,
) -> MoEConfig:
    """Check an MoE configuration and return it: the groups must tile the GPUs as Megatron-LM requires.

    etp defaults to tp (Megatron's default); global_batch to micro_batch x dp. max_nodes (node-limited
    routing) must not exceed the nodes an EP group spans. expert_gemm: how the experts' GEMMs run
    (distlab.expert_gemms; None: the export format's own, FORMAT_EXPERT_GEMMS). Lesson 10 §7.

    >>> c = moe_config('deepseek-v3', 2048, pp=16, ep=64, global_batch=15360, max_nodes=4)
    >>> c.dp, c.edp, c.ep_nodes
    (128, 2, 8)
    """
    m = moe_model(model)
    n = whole_number(gpus, "gpus", 1, MAX_GPUS)
    tp, pp, ep = (whole_number(v, k, 1, MAX_GPUS) for v, k in ((tp, "tp"), (pp, "pp"), (ep, "ep")))
    etp = tp if etp is None else whole_number(etp, "etp", 1, MAX_GPUS)
    g = whole_number(gpus_per_node, "gpus_per_node", 1, 1024)
    groups = expert_groups(n, tp=tp, pp=pp, ep=ep, etp=etp)
    if m.experts % ep:
        raise ConfigurationError(f"ep={ep} does not divide the {m.experts} experts of {m.name}")
    if m.expert_ffn % etp:
        raise ConfigurationError(f"etp={etp} does not divide expert_ffn={m.expert_ffn}")
    if m.heads % tp:
        raise ConfigurationError(f"tp={tp} does not divide the {m.heads} attention heads of {m.name}")
    if pp > m.layers:
        raise ConfigurationError(f"pp={pp} is more than the {m.layers} layers")
    mesh.expert_layout(n, tp=tp, pp=pp, ep=ep, etp=etp, gpus_per_node=g)
    mb = whole_number(micro_batch, "micro_batch", 1, MAX_TOKENS)
    gb = mb * groups["dp"] if global_batch is None else whole_number(global_batch, "global_batch", 1, MAX_TOKENS)
    if gb % (mb * groups["dp"]):
        raise ConfigurationError(f"global_batch={gb} is not a multiple of micro_batch x dp = {mb} x {groups['dp']}")
    s = whole_number(m.seq_len if seq_len is None else seq_len, "seq_len", 1, MAX_SEQ_LEN)
    if capacity_factor is not None:
        expert_capacity(1, m.experts, m.top_k, capacity_factor)  # validates the factor
        capacity_factor = float(capacity_factor)
    how = None if expert_gemm is None else expert_gemm_name(expert_gemm)
    config = MoEConfig(m, n, tp, pp, ep, etp, groups["dp"], groups["edp"], mb, gb, s, capacity_factor, None, g, how)
    if max_nodes is not None:
        limit = whole_number(max_nodes, "max_nodes", 1, MAX_GPUS)
        if limit > config.ep_nodes:
            raise ConfigurationError(
                f"max_nodes={limit} is more than the {counted(config.ep_nodes, 'node')} an EP group of "
                f"{ep} spans; valid: 1 to {config.ep_nodes}"
            )
        if capacity_factor is not None:
            raise ConfigurationError(
                "give capacity_factor= or max_nodes=, not both (node-limited routing is "
                "modelled dropless, as DeepSeek-V3 trains)"
            )
        config = MoEConfig(m, n, tp, pp, ep, etp, groups["dp"], groups["edp"], mb, gb, s, None, limit, g, how)
    return config


def _as_config(config) -> MoEConfig:
    if not isinstance(config, MoEConfig):
        raise ConfigurationError(f"expected an MoEConfig from distlab.moe.moe_config, got {type(config).__name__}")
    return config


def megatron_moe_flags(config) -> list[str]:
    """Megatron-LM pretrain_gpt.py arguments for an MoE configuration: model, parallelism, batch, MoE.

    Lesson 10 §7.

    >>> c = moe_config('mixtral-8x7b', 64, tp=2, ep=8, etp=1, global_batch=256)
    >>> f = megatron_moe_flags(c); ' '.join(f[f.index('--num-experts'):][:6])
    '--num-experts 8 --moe-ffn-hidden-size 14336 --moe-router-topk 2'
    """
    c = _as_config(config)
    m = c.model
    if m.attention_sinks or m.window_layers:
        raise ConfigurationError(
            f"{m.name}: attention sinks and banded (sliding-window) layers are not in "
            f"distlab's table of Megatron-LM flags; no exporter here expresses them"
        )
    if m.attention_biases != m.expert_biases:
        raise ConfigurationError(
            f"{m.name}: Megatron-LM's --disable-bias-linear switches the biases of attention and MLP together"
        )
    return _megatron_model_flags(m, c) + _megatron_parallel_flags(c) + _megatron_expert_flags(m, c)


def _megatron_model_flags(m, c) -> list[str]:
    """The model's shape, attention, norms, embeddings and positions (Megatron-LM pretrain_gpt.py arguments)."""
    flags = [
        "--num-layers",
        str(m.layers),
        "--hidden-size",
        str(m.hidden),
        "--num-attention-heads",
        str(m.heads),
        "--ffn-hidden-size",
        str(m.dense_ffn or m.expert_ffn),
        "--swiglu",
        "--normalization",
        "RMSNorm",
    ]
    if m.attention == "mla":
        flags += [
            "--multi-latent-attention",
            "--q-lora-rank",
            str(m.q_lora_rank),
            "--kv-lora-rank",
            str(m.kv_lora_rank),
            "--qk-head-dim",
            str(m.qk_nope_head_dim),
            "--qk-pos-emb-head-dim",
            str(m.qk_rope_head_dim),
            "--v-head-dim",
            str(m.v_head_dim),
        ]
    else:
        if m.kv_heads < m.heads:
            flags += ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
        if m.head_dim * m.heads != m.hidden:
            flags += ["--kv-channels", str(m.head_dim)]
    if m.qk_norm:
        flags.append("--qk-layernorm")
    if not m.attention_biases:
        flags.append("--disable-bias-linear")
    if not m.tied_embeddings:
        flags.append("--untie-embeddings-and-output-weights")
    flags += [
        "--position-embedding-type",
        "rope",
        "--max-position-embeddings",
        str(c.seq_len),
        "--attention-dropout",
        "0.0",
        "--hidden-dropout",
        "0.0",
        "--padded-vocab-size",
        str(-(-m.vocab // c.tp) * c.tp),
    ]
    return flags


def _megatron_parallel_flags(c) -> list[str]:
    """Tensor/pipeline parallelism, batch, sequence, optimizer and precision arguments."""
    flags = ["--tensor-model-parallel-size", str(c.tp), "--pipeline-model-parallel-size", str(c.pp)]
    if c.tp > 1:
        flags.append("--sequence-parallel")  # required with MoE and TP (Megatron-Core MoE docs)
    flags += [
        "--micro-batch-size",
        str(c.micro_batch),
        "--global-batch-size",
        str(c.global_batch),
        "--seq-length",
        str(c.seq_len),
        "--use-distributed-optimizer",
        # the data-parallel overlap the step model prices (ZeRO-1: export.megatron_lm.megatron_dp_overlap_flags)
        *megatron_dp_overlap_flags(1, c.dp),
        "--bf16",
    ]
    return flags


def _megatron_expert_flags(m, c) -> list[str]:
    """The MoE arguments: experts, router, expert parallelism, dispatcher, shared experts, capacity, node limit."""
    flags = [
        "--num-experts",
        str(m.experts),
        "--moe-ffn-hidden-size",
        str(m.expert_ffn),
        "--moe-router-topk",
        str(m.top_k),
        "--expert-model-parallel-size",
        str(c.ep),
        "--expert-tensor-parallel-size",
        str(c.etp),
        "--moe-token-dispatcher-type",
        "alltoall",
    ]
    if c.expert_gemm != "sequential":  # Transformer Engine's GroupedLinear (expert_gemm 'multi-stream')
        flags.append("--moe-grouped-gemm")
    if m.shared_experts:
        flags += ["--moe-shared-expert-intermediate-size", str(m.shared_experts * m.expert_ffn)]
    if m.dense_layers:
        flags += ["--moe-layer-freq", f"([0]*{m.dense_layers}+[1]*{m.moe_layers})"]
    if c.capacity_factor is not None:
        flags += ["--moe-expert-capacity-factor", f"{c.capacity_factor:g}", "--moe-pad-expert-input-to-capacity"]
    if c.max_nodes is not None:
        flags += ["--moe-router-num-groups", str(c.ep_nodes), "--moe-router-group-topk", str(c.max_nodes)]
    return flags


def megatron_moe(config) -> str:
    """A torchrun line launching pretrain_gpt.py with megatron_moe_flags (one flag per line). Lesson 10 §7.

    >>> c = moe_config('mixtral-8x7b', 64, ep=8, global_batch=256)
    >>> print(megatron_moe(c).splitlines()[0])
    torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py \\
    """
    c = _as_config(config)
    g = c.gpus_per_node
    nnodes, nproc = (1, c.gpus) if c.gpus <= g else (math.ceil(c.gpus / g), g)
    if c.gpus > g and c.gpus % g:
        raise ConfigurationError(f"{c.gpus} GPUs do not fill whole nodes of {g}")
    env = "CUDA_DEVICE_MAX_CONNECTIONS=1 " if c.tp > 1 else ""
    lines = [f"{env}torchrun --nnodes {nnodes} --nproc-per-node {nproc} pretrain_gpt.py"]
    for word in megatron_moe_flags(c):
        if word.startswith("--"):
            lines.append(word)
        else:
            lines[-1] += " " + shlex.quote(word)
    return " \\\n    ".join(lines)


def torchtitan_moe(config) -> str:
    """A torchtitan TOML for an MoE configuration (models with a torchtitan flavor only). Lesson 10 §7.

    >>> c = moe_config('deepseek-v3', 256, pp=8, ep=32, etp=1, global_batch=512)
    >>> print(torchtitan_moe(c).splitlines()[1])
    name = "deepseek_v3"
    """
    c = _as_config(config)
    if c.model.name not in TORCHTITAN_FLAVORS:
        raise ConfigurationError(
            f"torchtitan has no flavor of {c.model.name} in distlab's table (known: "
            f"{', '.join(TORCHTITAN_FLAVORS)}); export to megatron"
        )
    if c.etp not in (1, c.tp):
        raise ConfigurationError(
            f"etp={c.etp}: torchtitan supports expert tensor parallelism 1 or equal to tp "
            f"({c.tp}); Megatron-LM accepts any etp"
        )
    if c.capacity_factor is not None:
        raise ConfigurationError(
            "torchtitan's MoE routes dropless (no capacity factor); export to megatron or deepspeed for token dropping"
        )
    shard = c.gpus // (c.tp * c.pp)
    borrow = shard * (c.tp if c.etp == 1 else 1)
    if borrow % c.ep:
        raise ConfigurationError(
            f"ep={c.ep} must divide torchtitan's data-parallel shard degree {shard}"
            f"{' x tp' if c.etp == 1 else ''} = {borrow} (EP borrows those ranks)"
        )
    if c.global_batch % shard:
        raise ConfigurationError(f"global_batch={c.global_batch} is not a multiple of the {shard} data-parallel shards")
    name, flavor = TORCHTITAN_FLAVORS[c.model.name]
    sections: dict[str, dict[str, object]] = {
        "model": {"name": name, "flavor": flavor},
        "training": {"seq_len": c.seq_len, "local_batch_size": c.global_batch // shard},
        "parallelism": {
            "data_parallel_shard_degree": shard,
            "tensor_parallel_degree": c.tp,
            "pipeline_parallel_degree": c.pp,
            "expert_parallel_degree": c.ep,
            "expert_tensor_parallel_degree": c.etp,
            "pipeline_parallel_microbatch_size": c.micro_batch,
        },
    }
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


def deepspeed_moe(config) -> dict:
    """DeepSpeed-MoE layer arguments (deepspeed.moe.layer.MoE) for an MoE configuration. Lesson 10 §7.

    >>> deepspeed_moe(moe_config('mixtral-8x7b', 64, ep=8, capacity_factor=1.25))['capacity_factor']
    1.25
    """
    c = _as_config(config)
    m = c.model
    if m.shared_experts:
        raise ConfigurationError(
            f"{m.name} has {counted(m.shared_experts, 'shared expert')}: DeepSpeed-MoE has none "
            f"(use_residual is PR-MoE's mixed residual MLP); export to megatron"
        )
    if c.max_nodes is not None:
        raise ConfigurationError("node-limited routing: DeepSpeed-MoE's gates have no node limit; export to megatron")
    if c.etp not in (1, c.tp):
        raise ConfigurationError(
            f"etp={c.etp}: DeepSpeed-MoE's expert tensor parallelism reuses the model's tp ({c.tp}) or none"
        )
    return {
        "hidden_size": m.hidden,
        "num_experts": m.experts,
        "ep_size": c.ep,
        "k": m.top_k,
        "capacity_factor": 1.0 if c.capacity_factor is None else c.capacity_factor,
        "drop_tokens": c.capacity_factor is not None,
        "use_residual": False,
        "enable_expert_tensor_parallelism": c.etp > 1,
    }


def export_moe(config, fmt: str) -> str:
    """The configuration in engine format `fmt` (one of FORMATS) as text. Lesson 10 §7.

    >>> export_moe(moe_config('mixtral-8x7b', 8, ep=8), 'deepspeed').startswith('{')
    True
    """
    key = fmt.strip().lower() if isinstance(fmt, str) else fmt
    if key not in FORMATS:
        raise ConfigurationError(f"format={fmt!r}; valid: {', '.join(FORMATS)}")
    runs = FORMAT_EXPERT_GEMMS[key]
    if _as_config(config).expert_gemm not in (None, *runs):
        raise ConfigurationError(
            f"expert_gemm={config.expert_gemm!r}: the {key} export runs an MoE layer's experts "
            f"{' or '.join(repr(r) for r in runs)} (distlab.moe.export.FORMAT_EXPERT_GEMMS)"
        )
    if key == "megatron":
        return megatron_moe(config)
    if key == "torchtitan":
        return torchtitan_moe(config)
    return json.dumps(deepspeed_moe(config), indent=2)
