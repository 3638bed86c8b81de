"""A token-routing simulation: router scores -> top-k -> per-expert load -> capacity -> the all-to-all byte matrix.

The ep GPUs of one expert-parallel group each hold tokens_per_gpu tokens and experts / ep experts (GPU g
holds experts g E/ep .. (g+1) E/ep - 1). Each token gets router logits

    z[t, e] = noise[t, e] + skew x popularity[e]      noise, popularity ~ N(0, 1), seeded

so skew = 0 routes uniformly in expectation and a larger skew sends more tokens to the same few experts
(what an unbalanced router does before its balancing loss or bias catches up). Each token picks its top_k
experts (Shazeer et al. 2017). With node-limited routing (DeepSeek-V3 report Sec. 2.1.2) a token first
picks the max_nodes nodes whose experts have the highest sums of their top ceil(k / max_nodes) scores and
chooses its k experts among those nodes only. With a capacity factor each (source GPU, expert) pair
accepts at most C = expert_capacity(tokens_per_gpu, E, k, capacity_factor) copies, in token order (GShard
Sec. 2.2, Switch Transformer Sec. 2.2); the rest are dropped, and the dispatch is padded to C rows per
expert (Megatron-Core --moe-pad-expert-input-to-capacity). The result is a record of read-only arrays
that the plots draw and the tests check against the closed forms of distlab.moe.cost, like
distlab.collectives' ring simulation. Lesson 10 §2-§3.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .._arguments import readonly, whole_number
from ..errors import ConfigurationError
from ..units import positive
from .capacity import expert_capacity, imbalance_factor

__all__ = ["MAX_SCORES", "RoutingTrace", "simulate_routing"]

#: Largest router-score matrix (tokens x experts) a simulation builds: 4M numbers, 32 MB.
MAX_SCORES = 2**22


@dataclass(frozen=True, eq=False)
class RoutingTrace:
    """One simulated MoE layer's routing over an EP group: read-only NumPy arrays and the settings.

    choices[t, j]: the j-th expert of token t; source[t]: its GPU; kept[t, j]: the copy passed capacity;
    demand[e]: copies routed to expert e; load[e]: copies it accepted; bytes_matrix[i, j]: bytes GPU i
    sends GPU j in one all-to-all (the diagonal stays on the GPU); node_bytes[i, n]: with node-limited
    routing, bytes GPU i sends node n once per token (the network part).
    """

    tokens_per_gpu: int
    experts: int
    top_k: int
    ep: int
    ep_per_node: int
    hidden: int
    element_bytes: float
    skew: float
    capacity: int | None
    max_nodes: int | None
    seed: int
    choices: np.ndarray
    source: np.ndarray
    kept: np.ndarray
    demand: np.ndarray
    load: np.ndarray
    bytes_matrix: np.ndarray
    node_bytes: np.ndarray | None

    @property
    def tokens(self) -> int:
        return self.tokens_per_gpu * self.ep

    @property
    def copies(self) -> int:
        """Token copies routed: tokens x top_k."""
        return self.tokens * self.top_k

    @property
    def dropped(self) -> int:
        """Copies over capacity (0 when dropless)."""
        return int(self.copies - self.kept.sum())

    @property
    def drop_fraction(self) -> float:
        return self.dropped / self.copies

    @property
    def gpu_load(self) -> np.ndarray:
        """Copies each GPU's experts process (accepted only)."""
        return self.load.reshape(self.ep, -1).sum(axis=1)

    @property
    def imbalance(self) -> float:
        """Busiest GPU's accepted copies / the mean (distlab.moe.imbalance_factor): the expert GEMMs' slowdown."""
        return imbalance_factor(self.load, self.ep)

    @property
    def expert_imbalance(self) -> float:
        """Busiest expert's routed copies over the mean (before capacity)."""
        return float(self.demand.max() / self.demand.mean())

    def node_of_gpu(self) -> np.ndarray:
        return np.arange(self.ep) // self.ep_per_node

    def bytes_sent(self) -> np.ndarray:
        """Bytes each GPU sends to other GPUs (off the diagonal) in one all-to-all."""
        return self.bytes_matrix.sum(axis=1) - np.diag(self.bytes_matrix)

    def intra_inter_bytes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per GPU: bytes to other GPUs on its node, and bytes across nodes (deduplicated per node with
        node-limited routing)."""
        node = self.node_of_gpu()
        same = node[:, None] == node[None, :]
        off = ~np.eye(self.ep, dtype=bool)
        intra = (self.bytes_matrix * (same & off)).sum(axis=1)
        if self.node_bytes is not None:
            own = np.zeros_like(self.node_bytes, dtype=bool)
            own[np.arange(self.ep), node] = True
            inter = np.where(own, 0.0, self.node_bytes).sum(axis=1)
        else:
            inter = (self.bytes_matrix * ~same).sum(axis=1)
        return intra, inter

    def pairwise_step(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Step s of the pairwise exchange (1 <= s < ep): GPU i sends to (i + s) mod ep. Returns (src, dst, bytes)."""
        s = whole_number(step, "step", 1, max(1, self.ep - 1)) if self.ep > 1 else None
        if s is None:
            raise ConfigurationError("one GPU exchanges nothing: the all-to-all has no steps when ep = 1")
        src = np.arange(self.ep)
        dst = (src + s) % self.ep
        return src, dst, self.bytes_matrix[src, dst]

    def summary(self) -> str:
        intra, inter = self.intra_inter_bytes()
        cap = (
            "dropless"
            if self.capacity is None
            else f"capacity {self.capacity}, {100 * self.drop_fraction:.1f}% dropped"
        )
        return (
            f"{self.tokens} tokens x top-{self.top_k} over {self.experts} experts on {self.ep} GPUs ({cap}); "
            f"busiest GPU x{self.imbalance:.2f} the mean;\n    per GPU {intra.mean() / 1e6:.3g} MB intra-node, "
            f"{inter.mean() / 1e6:.3g} MB inter-node per all-to-all"
        )


@functools.lru_cache(maxsize=8)
def _router_noise(seed: int, tokens: int, experts: int) -> tuple[np.ndarray, np.ndarray]:
    """The seeded popularity (experts,) and noise (tokens, experts), float32, read-only; cached, so a widget
    that moves only the skew or the capacity does not draw them again."""
    rng = np.random.default_rng(seed)
    popularity = rng.standard_normal(experts, dtype=np.float32)
    noise = rng.standard_normal((tokens, experts), dtype=np.float32)
    return readonly(popularity), readonly(noise)


def simulate_routing(
    tokens_per_gpu,
    experts,
    top_k,
    ep,
    *,
    hidden=1024,
    element_bytes=2.0,
    skew=0.0,
    capacity_factor=None,
    ep_per_node=None,
    max_nodes=None,
    seed=0,
) -> RoutingTrace:
    """Route tokens_per_gpu x ep tokens through a seeded router and count the all-to-all (see the module doc).

    Bounded up front: tokens x experts <= MAX_SCORES. Lesson 10 §2.

    >>> tr = simulate_routing(256, 8, 2, 4, hidden=16, seed=1)
    >>> int(tr.load.sum()), tr.dropped, float(tr.bytes_matrix.sum()) == 1024 * 2 * 16 * 2
    (2048, 0, True)
    """
    t, e, k, ep, h, b, p, limit = _checked(
        tokens_per_gpu, experts, top_k, ep, hidden, element_bytes, skew, ep_per_node, max_nodes
    )
    seed = whole_number(seed, "seed", 0, 2**32 - 1)
    capacity = None if capacity_factor is None else expert_capacity(t, e, k, capacity_factor)

    popularity, noise = _router_noise(seed, t * ep, e)
    choices = _top_k(noise + np.float32(skew) * popularity, k, ep // p, limit)
    source = (np.arange(t * ep) // t).astype(np.int32)
    demand = np.bincount(choices.ravel(), minlength=e)
    kept = _kept(choices, source, e, capacity)
    load = np.bincount(choices[kept], minlength=e)
    matrix, node_bytes = _bytes_sent(choices, source, t, e, ep, p, h * b, capacity, limit)
    return RoutingTrace(
        t,
        e,
        k,
        ep,
        p,
        h,
        b,
        float(skew),
        capacity,
        limit,
        seed,
        readonly(choices),
        readonly(source),
        readonly(kept),
        readonly(demand),
        readonly(load),
        readonly(matrix),
        readonly(node_bytes) if node_bytes is not None else None,
    )


def _checked(tokens_per_gpu, experts, top_k, ep, hidden, element_bytes, skew, ep_per_node, max_nodes):
    """(t, e, k, ep, h, b, p, max_nodes or None), validated in the order simulate_routing documents."""
    t = whole_number(tokens_per_gpu, "tokens_per_gpu", 1, MAX_SCORES)
    e = whole_number(experts, "experts", 1, 4096)
    k = whole_number(top_k, "top_k", 1, e)
    ep = whole_number(ep, "ep", 1, e)
    if e % ep:
        raise ConfigurationError(f"ep={ep} does not divide the {e} experts (each GPU holds experts/ep of them)")
    if t * ep * e > MAX_SCORES:
        raise ConfigurationError(
            f"tokens_per_gpu x ep x experts = {t * ep * e:,} router scores is more than this "
            f"simulation builds ({MAX_SCORES:,}); use fewer tokens (the closed forms in "
            f"distlab.moe scale to any size)"
        )
    h = whole_number(hidden, "hidden", 1, 2**20)
    b = positive(element_bytes, "B", "element_bytes")
    if not isinstance(skew, (int, float)) or isinstance(skew, bool) or not math.isfinite(skew) or not 0 <= skew <= 10:
        raise ConfigurationError(f"skew={skew!r} must be a number from 0 (balanced) to 10")
    p = ep if ep_per_node is None else whole_number(ep_per_node, "ep_per_node", 1, ep)
    if ep % p:
        raise ConfigurationError(f"ep_per_node={p} must divide ep={ep}")
    nodes = ep // p
    limit = None
    if max_nodes is not None:
        limit = whole_number(max_nodes, "max_nodes", 1, nodes)
        if k > limit * (e // nodes):
            raise ConfigurationError(
                f"top_k={k} experts do not fit on max_nodes={limit} nodes of {e // nodes} "
                f"experts; valid max_nodes: {math.ceil(k / (e // nodes))} to {nodes}"
            )
    return t, e, k, ep, h, b, p, limit


def _top_k(scores: np.ndarray, k: int, nodes: int, limit) -> np.ndarray:
    """Each token's k highest-scoring experts; with a node limit M < nodes, only among the M nodes whose best
    ceil(k/M) scores sum highest (DeepSeek-V3 report Sec. 2.1.2). `scores` (tokens x experts) is overwritten."""
    tokens, e = scores.shape
    per_node = e // nodes
    if limit is not None and limit < nodes:
        best = math.ceil(k / limit)
        grouped = scores.reshape(tokens, nodes, per_node)
        node_score = -np.partition(-grouped, best - 1, axis=2)[:, :, :best].sum(axis=2)
        chosen_nodes = np.argpartition(-node_score, limit - 1, axis=1)[:, :limit]
        mask = np.ones((tokens, nodes), dtype=bool)
        mask[np.arange(tokens)[:, None], chosen_nodes] = False
        scores[np.repeat(mask, per_node, axis=1)] = -np.inf
    return np.argpartition(scores, e - k, axis=1)[:, e - k :].astype(np.int32)


def _kept(choices: np.ndarray, source: np.ndarray, e: int, capacity) -> np.ndarray:
    """Which token copies an expert accepts: all (dropless), else the first `capacity` from each source GPU in
    token order."""
    if capacity is None:
        return np.ones_like(choices, dtype=bool)
    k = choices.shape[1]
    key = (np.repeat(source, k) * e + choices.ravel()).astype(np.int64)
    order = np.argsort(key, kind="stable")  # token order inside each (source GPU, expert)
    sorted_key = key[order]
    starts = np.searchsorted(sorted_key, sorted_key, side="left")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size) - starts
    return (rank < capacity).reshape(choices.shape)


def _bytes_sent(choices, source, t, e, ep, p, row_bytes, capacity, limit):
    """(ep x ep bytes from each GPU to each GPU; with a node limit, the bytes from each GPU to each node)."""
    k = choices.shape[1]
    gpu_of_expert = np.arange(e) // (e // ep)
    if capacity is None:
        dst = gpu_of_expert[choices]
        pair = np.repeat(source, k).astype(np.int64) * ep + dst.ravel()
        matrix = np.bincount(pair, minlength=ep * ep).reshape(ep, ep) * row_bytes
    else:
        matrix = np.full((ep, ep), (e // ep) * capacity * row_bytes)
    if limit is None:
        return matrix, None
    node_of_choice = gpu_of_expert[choices] // p
    hit = np.zeros((t * ep, ep // p), dtype=bool)
    hit[np.repeat(np.arange(t * ep), k), node_of_choice.ravel()] = True
    per_source = np.add.reduceat(hit.astype(float), np.arange(0, t * ep, t), axis=0)
    return matrix, per_source * row_bytes
