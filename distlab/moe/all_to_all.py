"""The all-to-alls of mixture-of-experts layers under expert parallelism: bytes and time.

All-to-all (GShard Sec. 3; Megatron-Core "alltoall" token dispatcher): each MoE layer dispatches the
T x k token copies of a GPU to the GPUs of its EP group that hold the chosen experts and combines the
outputs back. A GPU's send buffer per all-to-all is M = T k h bytes-per-element (E C h with capacity
padding); with uniform routing (ep-1)/ep of it leaves the GPU: (p-1)/ep to the p-1 other EP members on
its node over NVLink, (ep-p)/ep to other nodes over the network. DeepSeek-V3's node-limited routing
(report Sec. 2.1.2 and 3.2.2) sends each token to at most M nodes and crosses the network once per target
node (then NVLink forwards it to the experts there): its inter-node bytes per token are h x (expected
remote nodes), at most M h instead of k h.

Every link number comes from distlab.hardware (the cluster's intra-node link and its fabric share per
GPU); the intra-node part is distlab.collectives' pairwise all-to-all. Lesson 10 §5-§6.
"""

from __future__ import annotations

import math

from .. import collectives, mesh
from .._arguments import as_cluster, divisors, short_list, whole_number
from ..errors import ConfigurationError
from ..units import positive
from .capacity import MAX_EXPERTS, MAX_GPUS, MAX_TOKENS, _ep_divides, expert_capacity

__all__ = ["expected_remote_nodes", "all_to_all_bytes", "all_to_all_time", "ep_members_per_node"]


def expected_remote_nodes(experts, top_k, nodes, max_nodes=None) -> float:
    """Expected number of OTHER nodes a token's top_k experts sit on (each is crossed once, then NVLink).

    E experts spread evenly over n nodes (E/n each). Uniform routing without a node limit: a given node
    holds none of the k distinct experts with probability C(E - E/n, k) / C(E, k), so
    n (1 - C(E - E/n, k) / C(E, k)) nodes are hit, (n - 1)/n of them remote (by symmetry). DeepSeek-V3's
    node-limited routing (report Sec. 2.1.2) picks the max_nodes = M nodes whose best ceil(k/M) experts
    score highest, then the k experts among them, so nearly every chosen node receives one: we take all M,
    M (n - 1)/n remote, the report's bound ("at most M nodes"; the routing simulation gets 3.47 of 3.5 for
    V3's M = 4 of 8 nodes). Lesson 10 §5.

    >>> round(expected_remote_nodes(256, 8, 8), 3)  # DeepSeek-V3 experts on 8 nodes, no limit
    4.633
    >>> expected_remote_nodes(256, 8, 8, max_nodes=4)  # at most 4 nodes: 4 x 7/8
    3.5
    """
    e, k, n = (
        whole_number(experts, "experts", 1, MAX_EXPERTS),
        whole_number(top_k, "top_k", 1, MAX_EXPERTS),
        whole_number(nodes, "nodes", 1, MAX_GPUS),
    )
    if e % n:
        raise ConfigurationError(f"nodes={n} does not divide the {e} experts; valid: {short_list(divisors(e), 12)}")
    if k > e:
        raise ConfigurationError(f"top_k={k} is more than the {e} experts; valid: 1 to {e}")
    per_node = e // n
    if max_nodes is None:
        miss = math.comb(e - per_node, k) / math.comb(e, k)
        return n * (1.0 - miss) * (n - 1) / n
    chosen = whole_number(max_nodes, "max_nodes", 1, MAX_GPUS)
    if chosen > n:
        raise ConfigurationError(f"max_nodes={chosen} is more than the {n} nodes; valid: 1 to {n}")
    if k > chosen * per_node:
        raise ConfigurationError(
            f"top_k={k} experts do not fit on max_nodes={chosen} nodes of {per_node} "
            f"experts; valid max_nodes: {math.ceil(k / per_node)} to {n}"
        )
    return min(chosen, k) * (n - 1) / n


def all_to_all_bytes(
    tokens,
    hidden,
    top_k,
    ep,
    *,
    ep_per_node=None,
    element_bytes=2.0,
    experts=None,
    capacity_factor=None,
    max_nodes=None,
) -> dict:
    """Bytes one GPU sends in ONE all-to-all (dispatch or combine) of an MoE layer, intra- and inter-node.

    Send buffer M = tokens x top_k x hidden x element_bytes (dropless), or experts x C x hidden x
    element_bytes with capacity padding (C = expert_capacity(tokens, experts, top_k, capacity_factor)).
    Uniform routing: intra = M (p-1)/ep, inter = M (ep-p)/ep, with p = ep_per_node (EP members per node;
    default: all of them). With max_nodes (DeepSeek-V3 node-limited routing, dropless) a token crosses the
    network once per remote target node: inter = tokens x hidden x element_bytes x expected_remote_nodes,
    and each target node's copies reach their GPUs over NVLink. GShard Sec. 3; DeepSeek-V3 Sec. 3.2.2.
    Lesson 10 §5.

    >>> b = all_to_all_bytes(4096, 4096, 2, 8, ep_per_node=8)  # Mixtral layer, one 4K sequence, EP 8 in a node
    >>> b['intra'] / 1e6, b['inter']
    (58.720256, 0.0)
    """
    t = whole_number(tokens, "tokens", 1, MAX_TOKENS)
    h = whole_number(hidden, "hidden", 1, 2**20)
    k, ep = whole_number(top_k, "top_k", 1, MAX_EXPERTS), whole_number(ep, "ep", 1, MAX_GPUS)
    p = ep if ep_per_node is None else whole_number(ep_per_node, "ep_per_node", 1, MAX_GPUS)
    if p > ep or ep % p:
        raise ConfigurationError(
            f"ep_per_node={p} must divide ep={ep} (EP members on each node); valid: {short_list(divisors(ep), 12)}"
        )
    b = positive(element_bytes, "B", "element_bytes")
    if experts is None:
        if capacity_factor is not None or max_nodes is not None:
            raise ConfigurationError("capacity_factor= and max_nodes= need experts= (routed experts per layer)")
        e = None
    else:
        e = whole_number(experts, "experts", 1, MAX_EXPERTS)
        _ep_divides(ep, e)
        if k > e:
            raise ConfigurationError(f"top_k={k} is more than the {e} experts; valid: 1 to {e}")
    if capacity_factor is not None:
        if max_nodes is not None:
            raise ConfigurationError(
                "give capacity_factor= or max_nodes=, not both (node-limited routing is "
                "modelled dropless, as DeepSeek-V3 trains)"
            )
        if e is None:  # checked above; this narrows e for the type checker
            raise ConfigurationError("capacity_factor= needs experts= (routed experts per layer)")
        send = e * expert_capacity(t, e, k, capacity_factor) * h * b
    else:
        send = t * k * h * b
    intra = send * (p - 1) / ep
    inter = send * (ep - p) / ep
    if max_nodes is not None and ep > p:
        nodes = ep // p
        inter = t * h * b * expected_remote_nodes(e, k, nodes, max_nodes)
        intra = send * (p - 1) / ep  # copies for experts on the own node; forwarding inside target nodes
        # runs on those nodes' NVLink in parallel and is counted there (same amount by symmetry)
    return {"send_buffer": float(send), "intra": float(intra), "inter": float(inter)}


def all_to_all_time(intra_bytes, inter_bytes, ep, cluster, *, ep_per_node=None) -> float:
    """Seconds of one all-to-all: the NVLink part and the network part run at once; the slower sets the time.

    distlab.collectives.placed_all_to_all_time_array: intra, the pairwise all-to-all over the p GPUs of a node
    ((p-1) steps of alpha plus bytes / the node's link bandwidth); inter: (ep - p) alpha_fabric + bytes / the fabric
    bandwidth per GPU when every GPU sends (Cluster.inter_node_bandwidth_per_gpu). Lesson 10 §5.

    >>> from distlab import hardware
    >>> c = hardware.cluster('dgx-h100', 8)
    >>> round(all_to_all_time(58.72e6, 0, 8, c) * 1e3, 3)  # 58.7 MB over NVLink 4 at 450 GB/s
    0.154
    """
    c = as_cluster(cluster)
    ep = whole_number(ep, "ep", 1, MAX_GPUS)
    p = ep if ep_per_node is None else whole_number(ep_per_node, "ep_per_node", 1, MAX_GPUS)
    if p > ep or ep % p:
        raise ConfigurationError(f"ep_per_node={p} must divide ep={ep}; valid: {short_list(divisors(ep), 12)}")
    if p > c.gpus_per_node:
        raise ConfigurationError(f"ep_per_node={p} is more than the {c.gpus_per_node} GPUs of a {c.node.name} node")
    intra = positive(intra_bytes, "B", "intra_bytes") if intra_bytes else 0.0
    inter = positive(inter_bytes, "B", "inter_bytes") if inter_bytes else 0.0
    # the placed all-to-all (collectives.placed_all_to_all_time_array); a part with nothing to send sends no message
    time = collectives.placed_all_to_all_time_array(
        intra,
        inter,
        ep,
        p,
        c.intra_link.bandwidth,
        c.intra_link.latency if intra > 0 else 0.0,
        c.inter_node_bandwidth_per_gpu,
        c.fabric.latency if inter > 0 else 0.0,
    )
    return float(time)


def ep_members_per_node(*, etp=1, ep=1, gpus_per_node=8) -> int:
    """EP-group members sharing a node in Megatron's expert rank layout (EP neighbours etp ranks apart).

    From distlab.mesh.expert_layout (Megatron-LM's expert rank generator, order tp-ep-dp-pp with tp = etp):
    ep / (nodes an EP group spans, the most of any group). Lesson 10 §6.

    >>> ep_members_per_node(etp=2, ep=8), ep_members_per_node(etp=1, ep=8), ep_members_per_node(etp=8, ep=8)
    (4, 8, 1)
    """
    g = whole_number(gpus_per_node, "gpus_per_node", 1, 1024)
    etp, ep = whole_number(etp, "etp", 1, MAX_GPUS), whole_number(ep, "ep", 1, MAX_GPUS)
    grid = mesh.expert_layout(etp * ep, tp=etp, ep=ep, etp=etp, gpus_per_node=g)
    spanned = int(grid.nodes_spanned("ep").max())
    return max(1, grid.ep // spanned)
