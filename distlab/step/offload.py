"""Activation offloading to host memory (Megatron-Core --cpu-offloading-num-layers N): the step model's memory saving
and its exposed copy time. Lesson 7 §2 (memory) and §1 (the step's parts).

The mechanism, read in the source the published runs used:

* Megatron-LM megatron/core/transformer/transformer_block.py (NVIDIA/Megatron-LM at d98e8a6) builds the context with
  get_cpu_offload_context(cpu_offloading, cpu_offloading_num_layers, config.num_layers, activations, weights,
  double_buffering, ...): N counts the MODEL's layers (config.num_layers), and TransformerConfig refuses
  N outside 0 <= N < num_layers, pipeline parallelism (pp > 1) and any recompute_granularity
  (megatron/core/transformer/transformer_config.py at d98e8a6). After each layer's forward the block calls
  group_prefetch_offload_commit_async (one "group" per layer).
* Transformer Engine transformer_engine/pytorch/cpu_offload.py at v2.9 (70f5366; Megatron Bridge 25.11 pins
  transformer-engine >= 2.9.0a0, < 2.10.0): AsyncDoubleBufferGroupOffloadHandler offloads the groups
  current_group < N, the model's FIRST N layers, of every tensor marked with mark_activation_offload: the inputs,
  norm outputs and statistics TE's layernorm_linear / linear / layernorm_mlp save, the attention backends' q, k, v,
  output and softmax statistics, Megatron's fused bias-SwiGLU input (megatron/core/fusions/fused_bias_swiglu.py):
  a layer's whole stored-activation count (weights are not offloaded: offload_weights is deprecated there).
  layer_window_map spreads the N groups over the L layers, window i ending at layer q (i + 1) - 1 + min(i + 1, r)
  (q = L // N, r = L mod N). Group 0's device-to-host copy starts after layer 0's forward on a side stream (d2h);
  at the end of window i's last layer both streams synchronise, group i's GPU tensors are freed and group i + 1's
  copy starts: a copy runs beside the forward of its window's layers (q or q + 1; group 0's one fewer), and the part
  of it longer than that compute waits on the main stream. The backward mirrors it on the h2d stream: group i is
  reloaded when the backward reaches its window's last layer (a prefetch) and the main stream waits for it at the
  next window (group 0: before layer 0's backward).
* What stays on the GPU: each forward layer adds its activations and at most one group is freed per layer, so the
  peak is reached at the last layer, where N - 1 groups are gone and group N - 1 (freed at the last layer's commit)
  is reloaded at once by the backward: L - N + 1 layers resident, the offload window of ONE layer. Offloading N
  layers saves (N - 1) layers' activations per microbatch in flight (N = 1 saves nothing and still copies).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._arguments import number_array
from ..errors import ConfigurationError
from ..pipeline.closed_form import in_flight_array
from ..units import format_bytes, format_rate, format_seconds
from .config import StepConfig
from .footprint import per_layer_bytes

__all__ = [
    "OFFLOAD_SOURCE",
    "check_activation_offload",
    "offload_exposed_seconds",
    "offload_saved_layers",
    "offload_term",
    "offload_note",
    "offload_note_of",
    "offload_record",
]

#: Where the offload rule comes from (the module docstring derives it).
OFFLOAD_SOURCE = (
    "Megatron-LM transformer_block.py / transformer_config.py at d98e8a6 and Transformer Engine "
    "pytorch/cpu_offload.py at v2.9 (70f5366)"
)


def check_activation_offload(value, *, layers: int, pp: int, recompute: str, memory_recipe, node) -> int:
    """estimate's activation_offload_layers checked as Megatron-Core checks cpu_offloading_num_layers: a whole number
    from 0 to the model's layers - 1 (TransformerConfig: 0 <= N < num_layers); above 0 only with an engine recipe that
    offloads (MemoryRecipe.activation_offload: the 'megatron*' recipes), pp 1 and recompute 'none' (Megatron refuses
    cpu offloading with pipeline parallelism and with recomputation), on a node with a host link
    (hardware.Node.host_link_bandwidth). Lesson 7 §2.

    >>> from distlab import hardware, memory_recipes
    >>> check_activation_offload(40, layers=80, pp=1, recompute='none',
    ...                          memory_recipe=memory_recipes.memory_recipe('megatron-fsdp'),
    ...                          node=hardware.node('gb200-nvl72'))
    40
    """
    top = max(int(layers) - 1, 0)
    valid = f"valid: a whole number from 0 to {top} (the model's {layers} layers less one, as Megatron-Core asks)"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= int(value) <= top:
        raise ConfigurationError(f"activation_offload_layers={value!r}; {valid}")
    n = int(value)
    if n == 0:
        return 0
    name = getattr(memory_recipe, "name", memory_recipe)
    reasons = []
    if not getattr(memory_recipe, "activation_offload", False):
        reasons.append(
            f"memory_recipe {name!r} has no activation offloading (Megatron-Core's --cpu-offloading: the 'megatron*' "
            "recipes)"
        )
    if pp != 1:
        reasons.append(f"pp={pp}: Megatron-Core refuses cpu offloading with pipeline parallelism (pp 1 only)")
    if recompute != "none":
        reasons.append(f"recompute={recompute!r}: Megatron-Core refuses cpu offloading with recomputation")
    if getattr(node, "host_link_bandwidth", None) is None:
        reasons.append(
            f"node {getattr(node, 'name', node)!r} has no sourced GPU-to-host bandwidth (hardware.Node."
            "host_link_bandwidth), so the copies cannot be priced"
        )
    if reasons:
        raise ConfigurationError(
            f"activation_offload_layers={n}: " + "; ".join(reasons) + f"; {valid} only where these hold, else 0"
        )
    return n


def offload_saved_layers(offloaded):
    """Layers' activations per microbatch in flight that offloading `offloaded` layers takes off the GPU: N - 1 (the
    last offloaded layer stays: freed at the last layer's commit and reloaded at once by the backward; module
    docstring), 0 for N = 0. Lesson 7 §2.

    >>> offload_saved_layers([40, 1, 0]).tolist()
    [39.0, 0.0, 0.0]
    """
    return np.maximum(number_array(offloaded, "offloaded layers") - 1.0, 0.0)


def offload_exposed_seconds(copy_s, layer_s, layers, offloaded):
    """Exposed seconds of one direction's copies for one microbatch: sum over the N windows of max(0, copy_s - window
    x layer_s), the windows of Transformer Engine's layer_window_map (q = L // N layers, r = L mod N of them one more;
    group 0's one layer fewer); 0 when N = 0. copy_s: one layer's activation bytes / the host link; layer_s: one
    layer's forward (device to host) or backward (host to device). Lesson 7 §1.

    80 layers, 40 offloaded (q 2, r 0): 39 windows of 2 layers and group 0's of 1; a copy of 3 s beside 1 s layers
    exposes 39 x 1 + 2 = 41 s.

    >>> float(offload_exposed_seconds(3.0, 1.0, 80, 40))
    41.0
    """
    n = number_array(offloaded, "offloaded layers")
    layers = number_array(layers, "layers", low=1.0)
    copy_s, layer_s = number_array(copy_s, "copy_s"), number_array(layer_s, "layer_s")
    if np.any(n >= layers) or np.any(n != np.floor(n)):
        raise ConfigurationError(
            f"offloaded={offloaded!r}: whole numbers from 0 to layers - 1 ({np.max(layers) - 1:g})"
        )
    safe = np.maximum(n, 1.0)
    q = np.floor(layers / safe)
    r = layers - q * safe

    def exposed(window):
        return np.maximum(0.0, copy_s - window * layer_s)

    first = q + (r > 0)  # group 0's window before it loses its first layer
    total = r * exposed(q + 1.0) + (safe - r) * exposed(q) - exposed(first) + exposed(first - 1.0)
    return np.where(n > 0, total, 0.0)


def offload_term(c: StepConfig, r: dict) -> dict:
    """offload_s, the copies' exposed seconds per step (m microbatches x both directions, offload_exposed_seconds
    with one layer's stored activations over the host link and one layer's forward / backward time of dp_term), and
    activations_bytes less offload_saved_layers x one layer's activations x the microbatches in flight; also
    offload_bytes, the bytes each direction carries per step (m N one layer's activations). Without offloading
    (N = 0 everywhere) nothing changes: offload_s 0 and activations_bytes as activations_term counted them.
    Lesson 7 §1-§2."""
    n = np.asarray(c.offload_layers, dtype=float)
    if not np.any(n > 0):
        return dict(offload_s=0.0 * r["compute_s"])
    per_layer = per_layer_bytes(c, c.code)
    copy_s = per_layer / c.host_bw
    layers = c.layers_stage
    forward = offload_exposed_seconds(copy_s, r["layer_forward_s"], layers, n)
    backward = offload_exposed_seconds(copy_s, r["layer_backward_s"], layers, n)
    in_flight = in_flight_array(np.asarray(c.schedule_code), c.pp, c.m, c.v)
    saved = offload_saved_layers(n) * per_layer * in_flight
    return dict(
        offload_s=c.m * (forward + backward),
        offload_bytes=c.m * n * per_layer,
        activations_bytes=r["activations_bytes"] - saved,
    )


def offload_note(layers: int, bytes_per_step: float, bandwidth: float, link: str, exposed_s: float) -> str:
    """The one line explain()/summary() print for an estimate that offloads activations. Lesson 7 §2.

    >>> print(offload_note(40, 1.2e12, 225e9, 'NVLink-C2C', 0.5)[:88])
    activation offload: the first 40 layers' saved activations go to host memory and back (1
    """
    rate = format_rate(bandwidth) if math.isfinite(bandwidth) else "unlimited B/s"
    return (
        f"activation offload: the first {layers} layers' saved activations go to host memory and back "
        f"({format_bytes(bytes_per_step)} each way per step over {link}, {rate} per GPU per direction); "
        f"{format_seconds(exposed_s)} of the copies outlast the compute beside them (exposed); the GPU "
        f"keeps one offloaded layer resident ({OFFLOAD_SOURCE})"
    )


def offload_record(value, layers: int, node, config: dict, memory_recipe) -> dict:
    """{'activation_offload_layers': N} for training.estimate's configuration record, checked
    (check_activation_offload against the record's pp and recompute), or {} for N = 0: the default adds nothing to
    the record, so estimates without it stay as they were. Lesson 7 §2.

    >>> from distlab import hardware, memory_recipes
    >>> offload_record(0, 80, hardware.node('dgx-h100'), {'pp': 1, 'recompute': 'none'}, None)
    {}
    """
    n = check_activation_offload(
        value, layers=layers, pp=config["pp"], recompute=config["recompute"], memory_recipe=memory_recipe, node=node
    )
    return {"activation_offload_layers": n} if n else {}


def offload_note_of(config: dict, node, out: dict) -> str:
    """offload_note for an estimate's record, its node's host link and step_model_array's result (empty without
    offloading). Lesson 7 §2.

    >>> offload_note_of({}, None, {})
    ''
    """
    n = config.get("activation_offload_layers", 0)
    if not n:
        return ""
    name = getattr(node, "host_link_name", "") or "the host link"
    return offload_note(n, float(out["offload_bytes"]), node.host_link_bandwidth, name, float(out["offload_s"]))
