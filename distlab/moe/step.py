"""An MoE model inside the step model (training.estimate, planner.plan): what the dense core reads, and the
expert-parallel parts it adds.

A token of an MoE model runs its ACTIVE parameters, so the step model's compute path (distlab.flops per
layer, priced by distlab.efficiency: the expert matmuls are matmuls) takes a layer of
active_parameters_per_layer = (dense_layers x dense block + moe_layers x active MoE block) / layers;
with one pipeline stage this is exactly moe_step_flops' weight count. The attention core keeps
moe_step_flops' count (2 x keys x (q/k width + v width) per token and layer, banded layers seeing
min(s, window) keys), written as the dense core's 4 s a d with an effective d. Activations are Korthikanti's
dense layer with an MLP of the active width (top_k + shared) x expert_ffn (SwiGLU), plus what the router and the
dispatched token copies keep (routed_activation_extra_array: distlab.moe.activations' count of an MoE layer, spread
over the layers). Stated approximations: with pp > 1 every stage gets the average layer (DeepSeek-V3's dense first
layers differ from its MoE layers by the router only, 0.5%); the ring attention
of context parallelism passes K/V of kv_heads x the effective d; the TP collectives of a layer are the dense
layer's (Megatron's expert-TP all-gather / reduce-scatter of the dispatched tokens replaces the MLP's).

What expert parallelism adds (arrays, each input checked; configurations in check_expert_parallel):
  model states  non-expert weights as a dense model's over tp x pp, replicated over dp x cp; routed experts over
                etp x ep x pp, replicated over edp = N / (etp ep pp) (expert_parallel_memory's split)
  gradients     non-expert ones reduced over the dense DP group (stride tp), expert ones over the expert DP
                group of mesh.expert_layout (edp members, stride etp x ep), one after the other
  all-to-all    per MoE layer and microbatch ALL_TO_ALLS_PER_LAYER all-to-alls of T k h e bytes (T = b s /
                (tp cp) tokens per GPU), all_to_all_bytes / all_to_all_time vectorised, on the critical path
                (not overlapped; DualPipe's overlap is not modelled). Lesson 10 §5, Lesson 7 §1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._arguments import (
    broadcasting,
    code_array,
    divisors,
    finite_result,
    number_array,
    real_number,
    short_list,
    whole_number,
)
from ..collectives.placed import placed_all_to_all_time_array
from ..errors import ConfigurationError
from .catalog import MOE_MODELS, MoEModel
from .catalog import model as moe_model
from .activations import routed_activation_extra_array
from .capacity import MAX_GPUS, MAX_SEQ_LEN, busiest_expert_load
from .cost import ALL_TO_ALLS_PER_LAYER

__all__ = [
    "MoEStepModel",
    "step_model",
    "is_moe",
    "check_expert_parallel",
    "ep_members_per_node_array",
    "all_to_all_layer_time_array",
    "expert_state_bytes_array",
    "expert_gradient_bytes",
    "routed_activation_extra_array",
    "refuse_routing_for_dense",
]


@dataclass(frozen=True)
class MoEStepModel:
    """An MoE model as the dense step model reads it (see the module docstring): the shape fields of a
    TransformerModel, with the per-layer parameters and attention width of the ACTIVE model."""

    moe: MoEModel
    seq_len: int
    head_dim: float
    imbalance: float = 1.0  # the busiest EP rank's token copies over the mean (cost.imbalance_factor)
    capacity_factor: float | None = None  # None: dropless; else every expert's buffer is padded to this capacity
    max_nodes: int | None = None  # DeepSeek-V3's node-limited routing: at most this many nodes per token

    def expert_load(self, ep):
        """Token copies the busiest GPU's experts process, over the balanced T k: cost.busiest_expert_load (the
        capacity factor when one is set, else the imbalance, at most min(ep, E / k)). NumPy broadcast. Lesson 10 §3.

        >>> v = step_model('mixtral-8x7b', 4096, imbalance=1.5)
        >>> v.expert_load([1, 2, 8]).tolist()
        [1.0, 1.5, 1.5]
        """
        load = busiest_expert_load(self.imbalance, self.capacity_factor, ep, self.moe.experts, self.moe.top_k)
        return np.asarray(load, dtype=float)

    def busiest_params_per_layer(self, ep):
        """Active parameters of the average block on the busiest GPU: params_per_layer() with the routed experts'
        k x expert_params() of the MoE layers x expert_load(ep), what sets the layer's time (Lesson 10 §3).

        >>> v = step_model('mixtral-8x7b', 4096, imbalance=1.5)
        >>> round(float(v.busiest_params_per_layer(8) - v.params_per_layer()) / 1e6, 1)  # 0.5 x 2 x 176.2M
        176.2
        """
        m = self.moe
        routed = m.moe_layers / m.layers * m.top_k * float(m.expert_params())
        return self.params_per_layer() + (self.expert_load(ep) - 1.0) * routed

    def checked(self, ep, etp, gpus_per_node) -> "MoEStepModel":
        """This view, after checking its routing knobs against one configuration (training.estimate): imbalance
        at most min(ep, E / k); with max_nodes, the top_k experts fit on max_nodes of the nodes the EP group spans.
        Lesson 10 §5.

        >>> step_model('mixtral-8x7b', 4096, imbalance=1.5).checked(1, 1, 8)
        Traceback (most recent call last):
            ...
        distlab.errors.ConfigurationError: moe_imbalance=1.5 is more than min(ep, experts / top_k) = 1 (the busiest of ep=1 GPUs takes at most every copy); valid: 1 to 1
        """
        m = self.moe
        high = min(float(ep), m.experts / m.top_k)
        if self.capacity_factor is None and self.imbalance > high:
            raise ConfigurationError(
                f"moe_imbalance={self.imbalance:g} is more than min(ep, experts / top_k) = {high:g} (the busiest of "
                f"ep={ep} GPUs takes at most every copy); valid: 1 to {high:g}"
            )
        if self.max_nodes is not None:
            nodes = ep / float(ep_members_per_node_array(ep, etp, gpus_per_node))
            per_node = m.experts / nodes
            if m.top_k > min(self.max_nodes, nodes) * per_node:
                raise ConfigurationError(
                    f"max_nodes_per_token={self.max_nodes}: the top_k={m.top_k} experts of a token do not fit on "
                    f"{min(self.max_nodes, nodes):g} nodes of {per_node:g} experts; valid: "
                    f"{math.ceil(m.top_k / per_node)} or more"
                )
        return self

    @property
    def name(self) -> str:
        return self.moe.name

    @property
    def layers(self) -> int:
        return self.moe.layers

    @property
    def hidden(self) -> int:
        return self.moe.hidden

    @property
    def heads(self) -> int:
        return self.moe.heads

    @property
    def kv_heads(self) -> int:
        return self.moe.heads if self.moe.attention == "mla" else int(self.moe.kv_heads or self.moe.heads)

    @property
    def vocab(self) -> int:
        return self.moe.vocab

    @property
    def ffn(self) -> int:
        """The active MLP width of an MoE layer: (top_k + shared) x expert_ffn."""
        return (self.moe.top_k + self.moe.shared_experts) * self.moe.expert_ffn

    gated_mlp = True
    dropout = False
    norm = "rmsnorm"

    def params_per_layer(self) -> float:
        """Active parameters of the average block."""
        m = self.moe
        return (m.dense_layers * m.dense_layer_params() + m.moe_layers * m.moe_layer_active_params()) / m.layers

    def non_expert_params_per_layer(self) -> float:
        """What data parallelism replicates of the average block (all but its routed experts)."""
        m = self.moe
        return (m.non_expert_parameter_count() - m.embedding_params() - m.output_params()) / m.layers

    def embedding_params(self) -> int:
        return self.moe.embedding_params()

    def output_params(self) -> int:
        return self.moe.output_params() - self.moe.hidden

    def final_norm_params(self) -> int:
        return self.moe.hidden

    def parameter_count(self) -> int:
        return self.moe.parameter_count()


def is_moe(model) -> bool:
    """Whether `model` is an MoE catalog name or MoEModel (estimate and plan then take the MoE path). Lesson 10 §5.

    >>> is_moe('mixtral-8x7b'), is_moe('llama2-7b')
    (True, False)
    """
    return isinstance(model, MoEModel) or (isinstance(model, str) and model.strip().lower() in MOE_MODELS)


def refuse_routing_for_dense(model_name: str, moe_imbalance, capacity_factor, max_nodes_per_token) -> None:
    """Our error when a dense model gets MoE routing knobs other than their defaults (1, None, None): estimate's and
    plan's check. Lesson 10 §3.

    >>> refuse_routing_for_dense('llama2-7b', 1.5, None, None)
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: moe_imbalance=1.5, capacity_factor=None, max_nodes_per_token=None: routing applies to mixture-of-experts models; llama2-7b is dense (valid: 1, None, None)
    """
    if (
        not (type(moe_imbalance) in (int, float) and moe_imbalance == 1)
        or capacity_factor is not None
        or max_nodes_per_token is not None
    ):
        raise ConfigurationError(
            f"moe_imbalance={moe_imbalance!r}, capacity_factor={capacity_factor!r}, max_nodes_per_token="
            f"{max_nodes_per_token!r}: routing applies to mixture-of-experts models; {model_name} is dense "
            f"(valid: 1, None, None)"
        )


def _view(model) -> MoEStepModel:
    if not isinstance(model, MoEStepModel):
        raise ConfigurationError(f"model={model!r} must be an MoEStepModel (distlab.moe.step.step_model)")
    return model


def _groups(**values):
    """Group sizes (ep, etp, tp, pp, ...) as float arrays >= 1, our error naming the first that is not."""
    return tuple(number_array(v, name, 1.0) for name, v in values.items())


def _recipe(recipe):
    from ..memory import PrecisionRecipe

    if not isinstance(recipe, PrecisionRecipe):
        raise ConfigurationError(f"recipe={recipe!r} must be a PrecisionRecipe (distlab.memory.precision_recipe)")
    return recipe


def step_model(model, seq_len, *, imbalance=1.0, capacity_factor=None, max_nodes=None) -> MoEStepModel:
    """The MoEStepModel of an MoE model at sequence length seq_len: effective head width
    d = (q/k width + v width) / 2 x (mean keys per layer / s) / heads, so that 4 s a d = 2 keys (q/k + v width),
    moe_step_flops' attention core. Routing knobs (estimate's moe_imbalance, capacity_factor,
    max_nodes_per_token): imbalance from 1 to experts / top_k (each configuration clips it at ep, see expert_load);
    capacity_factor None (dropless) or above 0 up to experts / top_k (a capacity of every token); max_nodes a
    whole number of nodes, dropless only (as DeepSeek-V3 trains; cost.all_to_all_bytes). Lesson 10 §1, §3, §5.

    >>> v = step_model('mixtral-8x7b', 4096)
    >>> v.head_dim, v.ffn, round(v.params_per_layer() / 1e6, 1)  # 32 x 128 query width; 2 x 14336; 41.9M attention + 2 x 176.2M experts + router and norms
    (128.0, 28672, 394.3)
    """
    m = moe_model(model)
    s = float(whole_number(seq_len, "seq_len", 1, MAX_SEQ_LEN))
    windowed = m.window_layers
    keys = ((m.layers - windowed) * s + windowed * min(s, float(m.sliding_window or s))) / m.layers
    width = (m.attention_width + m.value_width) / 2.0 * keys / s
    high = m.experts / m.top_k
    imbalance = real_number(imbalance, "moe_imbalance", 1.0, high)
    if capacity_factor is not None:
        capacity_factor = real_number(capacity_factor, "capacity_factor", 0.0, high, low_open=True)
    if max_nodes is not None:
        max_nodes = whole_number(max_nodes, "max_nodes_per_token", 1, MAX_GPUS)
        if capacity_factor is not None:
            raise ConfigurationError(
                "give capacity_factor= or max_nodes_per_token=, not both (node-limited routing is modelled "
                "dropless, as DeepSeek-V3 trains)"
            )
    return MoEStepModel(m, int(seq_len), width / m.heads, imbalance, capacity_factor, max_nodes)


def check_expert_parallel(model, gpus, *, tp, cp, pp, ep, etp, sequence_parallel, gpus_per_node) -> tuple[int, int]:
    """(ep, etp) checked for an MoE model on `gpus` GPUs, or ConfigurationError naming the valid values: ep divides
    the routed experts, etp is 1 or tp (Megatron's expert tensor parallelism as the planner searches it) and divides
    the expert width, etp x ep x pp divides the GPUs, and with tp > 1 sequence parallelism is on (Megatron-Core
    requires it for MoE with TP). Lesson 10 §4.

    >>> check_expert_parallel('mixtral-8x7b', 16, tp=2, cp=1, pp=1, ep=3, etp=None, sequence_parallel=True,
    ...                       gpus_per_node=8)
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: ep=3 does not divide the 8 routed experts of mixtral-8x7b; valid ep: 1, 2, 4, 8
    """
    m = moe_model(model)
    gpus = whole_number(gpus, "gpus", 1, MAX_GPUS)
    tp, cp, pp = (whole_number(v, name, 1, MAX_GPUS) for v, name in ((tp, "tp"), (cp, "cp"), (pp, "pp")))
    gpus_per_node = whole_number(gpus_per_node, "gpus_per_node", 1, 1024)
    ep = whole_number(ep, "ep", 1, MAX_GPUS)
    etp = tp if etp is None else whole_number(etp, "etp", 1, MAX_GPUS)
    if m.experts % ep:
        raise ConfigurationError(
            f"ep={ep} does not divide the {m.experts} routed experts of {m.name}; "
            f"valid ep: {short_list(divisors(m.experts), 12)}"
        )
    if etp not in (1, tp):
        raise ConfigurationError(
            f"etp={etp}: expert tensor parallelism is 1 or the attention's tp={tp}; "
            f"valid etp: {', '.join(str(x) for x in sorted({1, tp}))}"
        )
    if m.expert_ffn % etp:
        raise ConfigurationError(f"etp={etp} does not divide expert_ffn={m.expert_ffn}; valid etp: 1")
    if etp > gpus_per_node or gpus_per_node % etp:
        raise ConfigurationError(f"etp={etp} must divide the {gpus_per_node} GPUs of a node; valid etp: 1")
    size = etp * ep * pp
    if gpus % size:
        valid = [e for e in divisors(m.experts) if gpus % (etp * e * pp) == 0]
        raise ConfigurationError(
            f"etp x ep x pp = {etp} x {ep} x {pp} = {size} does not divide the {gpus} GPUs "
            f"(the expert data-parallel degree must be whole); valid ep here: {short_list(valid, 12)}"
        )
    if tp > 1 and not sequence_parallel:
        raise ConfigurationError(
            f"tp={tp} with an MoE model needs sequence_parallel=True (Megatron-Core requires "
            f"sequence parallelism for MoE with tensor parallelism)"
        )
    return ep, etp


@broadcasting
def ep_members_per_node_array(ep, etp, gpus_per_node):
    """EP-group members on one node, min(ep, g / etp) (EP neighbours etp ranks apart; 1 when etp >= g): the closed
    form of cost.ep_members_per_node for etp dividing g and g / etp dividing ep or ep dividing it. NumPy broadcast,
    checked. Lesson 10 §6.

    >>> ep_members_per_node_array([8, 8, 8, 16], [1, 2, 8, 1], 8).tolist()
    [8.0, 4.0, 1.0, 8.0]
    """
    ep, etp, g = _groups(ep=ep, etp=etp, gpus_per_node=gpus_per_node)
    return np.where(etp >= g, 1.0, np.minimum(ep, np.floor(g / etp)))


@broadcasting
def all_to_all_layer_time_array(
    model: MoEStepModel,
    tokens,
    ep,
    etp,
    recompute_code,
    element_bytes,
    gpus_per_node,
    intra_bw,
    intra_lat,
    inter_bw,
    inter_lat,
):
    """Seconds of one MoE layer's all-to-alls for one microbatch on one GPU (forward + backward), dropless and
    uniformly routed: count x max(t_intra, t_inter), count = ALL_TO_ALLS_PER_LAYER (4, 6 with full recompute);
    send buffer M = tokens x top_k x h x e (with model.capacity_factor the padded E x capacity x h x e); p = EP
    members per node; intra = M (p-1)/ep bytes at
    (p-1) alpha_intra + intra / B_intra (the pairwise all-to-all), inter = M (ep-p)/ep at (ep-p) alpha_fabric +
    inter / B_fabric (with model.max_nodes: tokens x h x e x min(max_nodes, ep / p, top_k) (n-1)/n, one copy
    per remote node of n = ep / p). all_to_all_bytes and all_to_all_time on arrays; the time is
    collectives.placed_all_to_all_time_array's. Lesson 10 §5.

    Mixtral, one 4,096-token sequence, ep 8 in a node at 450 GB/s, no latency: M = 4096 x 2 x 4096 x 2 B =
    67.1 MB, 7/8 of it over NVLink: 58.7 MB / 450 GB/s = 130.5 us, x 4 all-to-alls = 522 us.

    >>> t = all_to_all_layer_time_array(step_model('mixtral-8x7b', 4096), 4096, 8, 1, 0, 2.0, 8, 450e9, 0.0, 50e9, 0.0)
    >>> round(float(t) * 1e6, 1)
    522.0
    """
    m = _view(model).moe
    ep, etp = _groups(ep=ep, etp=etp)
    p = ep_members_per_node_array(ep, etp, gpus_per_node)
    tokens, element_bytes = number_array(tokens, "tokens"), number_array(element_bytes, "element_bytes")
    intra_lat, inter_lat = number_array(intra_lat, "intra_lat"), number_array(inter_lat, "inter_lat")
    intra_bw, inter_bw = (number_array(v, n, 1e-300) for v, n in ((intra_bw, "intra_bw"), (inter_bw, "inter_bw")))
    recompute_code = code_array(recompute_code, "recompute_code", ("none", "selective", "full"))
    send = tokens * m.top_k * m.hidden * element_bytes
    if model.capacity_factor is not None:  # every expert's buffer padded to its capacity (cost.expert_capacity)
        capacity = np.maximum(1.0, np.ceil(model.capacity_factor * tokens * m.top_k / m.experts - 1e-9))
        send = m.experts * capacity * m.hidden * element_bytes
    intra, inter = send * (p - 1.0) / ep, send * (ep - p) / ep
    if model.max_nodes is not None:  # node-limited routing: one copy per remote node (cost.expected_remote_nodes)
        nodes = ep / p
        remote = np.minimum(np.minimum(float(model.max_nodes), nodes), m.top_k) * (nodes - 1.0) / nodes
        inter = tokens * m.hidden * element_bytes * remote
    one = placed_all_to_all_time_array(intra, inter, ep, p, intra_bw, intra_lat, inter_bw, inter_lat)
    count = np.where(np.asarray(recompute_code) == 2, ALL_TO_ALLS_PER_LAYER["full"], ALL_TO_ALLS_PER_LAYER["none"])
    return finite_result("all-to-all time", count * one)


@broadcasting
def expert_state_bytes_array(model: MoEStepModel, recipe, memory_recipe, zero, dpc, tp, pp, ep, etp, first_layers):
    """Per-GPU (weights, gradients, optimizer) bytes: the non-expert part over (dp cp, tp, pp) plus the routed
    experts over (edp, etp ep, pp), edp = dp cp tp / (etp ep). zero-paper recipe (memory_recipe None or not an
    engine's): memory.model_state_bytes_array of each part, layers spread evenly (expert_parallel_memory's split,
    which equals this at cp = 1). Engine recipes (memory_recipes.recipe_state_bytes_array): the first stage's
    first_layers non-expert blocks plus the embedding (and with pp = 1 the output layer), and the routed experts of
    min(moe_layers, first_layers) MoE layers (the most any stage holds); DeepSpeed's largest-layer buffer counted
    with the non-expert part. NumPy broadcast; our error for an invalid input. Lesson 10 §4.

    >>> from distlab import memory
    >>> w, g, o = expert_state_bytes_array(step_model('mixtral-8x7b', 4096), memory.precision_recipe('mixed'), None,
    ...                                    1, 8, 1, 1, 8, 1, 32)
    >>> round(float(w + g + o) / 1e9, 2)  # 1.606e9 non-expert x (4 + 12/8) + 45.097e9 experts x 16 / 8 = 8.83 + 90.19
    99.03
    """
    from .. import memory

    m = _view(model).moe
    recipe = _recipe(recipe)
    if memory_recipe is not None and not hasattr(memory_recipe, "engine"):
        raise ConfigurationError(f"memory_recipe={memory_recipe!r} must be None or a distlab.memory_recipes recipe")
    tp, pp, ep, etp, dpc = _groups(tp=tp, pp=pp, ep=ep, etp=etp, dpc=dpc)
    first_layers = number_array(first_layers, "first_layers", 1.0)
    edp = dpc * tp / (etp * ep)
    if memory_recipe is None or not memory_recipe.engine:
        dense = memory.model_state_bytes_array(float(m.non_expert_parameter_count()), recipe, zero, dpc, tp, pp)
        expert = memory.model_state_bytes_array(
            float(m.routed_expert_parameter_count()), recipe, zero, edp, etp * ep, pp
        )
    else:
        from ..memory_recipes import largest_layer_params, recipe_state_bytes_array

        layer = model.non_expert_params_per_layer()
        first = (
            np.asarray(first_layers, dtype=float) * layer
            + model.embedding_params()
            + np.where(pp == 1, float(m.output_params()), 0.0)
        )
        dense = recipe_state_bytes_array(
            memory_recipe, first / tp, layer / tp, largest_layer_params(model) / tp, zero, dpc
        )
        experts_layer = float(m.experts * m.expert_params())
        moe_first = np.minimum(float(m.moe_layers), np.asarray(first_layers, dtype=float))
        expert = recipe_state_bytes_array(
            memory_recipe, moe_first * experts_layer / (etp * ep), experts_layer / (etp * ep), 0.0, zero, edp
        )
    return tuple(finite_result("model-state bytes", d + x) for d, x in zip(dense, expert))


@broadcasting
def expert_gradient_bytes(model: MoEStepModel, recipe, tp, pp, ep, etp):
    """(non-expert, expert) gradient bytes per GPU before reduction: P_dense / (tp pp) x e_grad and
    P_experts / (etp ep pp) x e_grad. NumPy broadcast; our error for an invalid input. Lesson 10 §4.

    >>> from distlab import memory
    >>> d, x = expert_gradient_bytes(step_model('mixtral-8x7b', 4096), memory.precision_recipe('mixed'), 1, 1, 8, 1)
    >>> round(float(x) / 1e9, 2)  # 45.10e9 expert parameters / 8 x 2 B
    11.27
    """
    m = _view(model).moe
    tp, pp, ep, etp = _groups(tp=tp, pp=pp, ep=ep, etp=etp)
    e = _recipe(recipe).gradient_bytes
    return (
        float(m.non_expert_parameter_count()) / (tp * pp) * e,
        float(m.routed_expert_parameter_count()) / (etp * ep * pp) * e,
    )
