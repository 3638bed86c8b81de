"""Rank layouts for combined parallelism: which GPU holds which piece, and who talks to whom.

With tensor (tp), context (cp), expert (ep), data (dp) and pipeline (pp) parallelism together,
the world of N = tp x cp x ep x dp x pp GPUs is a grid with one axis per dimension. An ORDER
string such as Megatron-LM's default "tp-cp-ep-dp-pp" says how the grid is laid on the ranks:
the LEFTMOST dimension varies fastest, so with order d1-d2-...-dk and sizes s1, s2, ...

    rank = c1 + s1 x (c2 + s2 x (c3 + ...)),   ci the coordinate along di in [0, si)

(NVIDIA Megatron-LM, megatron/core/parallel_state.py: RankGenerator and
generate_masked_orthogonal_rank_groups, same formula and order convention). A GROUP of a
dimension is the set of ranks that differ only along it; every dimension's groups partition
the ranks. Groups are listed as Megatron-LM lists them: the group index enumerates the other
coordinates, fastest first, and each group is sorted by its own coordinate. Its documented
example, 16 GPUs with tp=2 and pp=4 (dp=2): TP groups [0,1], [2,3], ...; DP groups [0,2],
[1,3], [4,6], ...; PP groups [0,4,8,12], [1,5,9,13], ...

Placement: rank r runs on node r // g (g GPUs per node, consecutive ranks on one node, as
launchers such as torchrun number them). A group whose ranks sit on more than one node runs
its collectives over the inter-node link; this is how the lessons and the training lab decide
which link a TP, DP or PP collective uses, rather than assuming it.

Weights are replicated across dp and cp (context parallelism splits tokens, not weights), so
dense weight gradients are reduced over groups("dp-cp") (Megatron-LM piggybacks CP on the DP
group for that). Here ep is one more orthogonal axis of the same grid (the layout older
Megatron-Core versions used); recent versions lay expert layers out with a second generator.

torch: init_device_mesh lays ranks out row-major (the LAST mesh dimension varies fastest), so
the same layout is mesh_shape = the sizes in REVERSED order and mesh_dim_names the reversed
order: device_mesh() returns both.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .errors import ConfigurationError
from .units import TEXT_WIDTH, positive_int, WARNING_WIDTH, wrap_text

__all__ = [
    "DIMENSIONS",
    "DEFAULT_ORDER",
    "DIMENSION_NAMES",
    "MAX_WORLD_SIZE",
    "DeviceMeshSpec",
    "RankLayout",
    "parse_order",
    "layout",
    "expert_layout",
]

#: The parallel dimensions, by their Megatron-LM abbreviations.
DIMENSIONS = ("tp", "cp", "ep", "dp", "pp")
#: Megatron-LM's default order (initialize_model_parallel(order="tp-cp-ep-dp-pp")): tp fastest.
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
DIMENSION_NAMES = {"tp": "tensor", "cp": "context", "ep": "expert", "dp": "data", "pp": "pipeline"}
#: Largest world size a layout accepts (coordinates as int32 arrays stay small).
MAX_WORLD_SIZE = 2**22


def parse_order(order) -> tuple:
    """An order string ('tp-dp-pp', case-insensitive, '-' separated) as a tuple of all five dimensions.

    Dimensions it leaves out are appended (slowest) in the order of DEFAULT_ORDER; they must
    then have size 1 (checked by RankLayout).

    Lesson 6 §3 (the ordering rule: TP innermost).

    >>> parse_order('TP-DP')
    ('tp', 'dp', 'cp', 'ep', 'pp')
    """
    tokens = _listed(order)
    return tokens + tuple(d for d in DEFAULT_ORDER.split("-") if d not in tokens)


def _listed(order) -> tuple:
    """The dimensions an order string names, validated, in its order."""
    if isinstance(order, (tuple, list)):
        tokens = [str(t).strip().lower() for t in order]
    elif isinstance(order, str) and order.strip():
        tokens = [t.strip().lower() for t in order.strip().split("-")]
    else:
        raise ConfigurationError(
            f"order={order!r} must be a string such as {DEFAULT_ORDER!r} (leftmost varies fastest)"
        )
    for token in tokens:
        if token not in DIMENSIONS:
            raise ConfigurationError(
                f"order={order!r}: unknown dimension {token!r}; valid: {', '.join(DIMENSIONS)} (e.g. {DEFAULT_ORDER!r})"
            )
    repeated = sorted({t for t in tokens if tokens.count(t) > 1})
    if repeated:
        raise ConfigurationError(f"order={order!r} names {', '.join(repeated)} more than once")
    return tuple(tokens)


def _dims(dims, order) -> tuple:
    """'dp' or 'dp-cp' or ('dp', 'cp') -> a tuple of known dimensions, in the layout's order."""
    if isinstance(dims, str):
        tokens = [t.strip().lower() for t in dims.split("-")]
    elif isinstance(dims, (tuple, list)) and dims:
        tokens = [str(t).strip().lower() for t in dims]
    else:
        raise ConfigurationError(f"dims={dims!r} must name dimensions such as 'tp', 'dp' or 'dp-cp'")
    for token in tokens:
        if token not in DIMENSIONS:
            raise ConfigurationError(f"unknown dimension {token!r}; valid: {', '.join(DIMENSIONS)}")
    if len(set(tokens)) != len(tokens):
        raise ConfigurationError(f"dims={dims!r} names a dimension twice")
    return tuple(d for d in order if d in tokens)


@dataclass(frozen=True)
class DeviceMeshSpec:
    """The layout as torch.distributed.device_mesh.init_device_mesh arguments (outermost first)."""

    mesh_shape: tuple
    mesh_dim_names: tuple

    def code(self, device_type: str = "cuda") -> str:
        names = ", ".join(f'"{n}"' for n in self.mesh_dim_names)
        if len(self.mesh_dim_names) == 1:
            names += ","
        return f'init_device_mesh("{device_type}", {tuple(self.mesh_shape)!r}, mesh_dim_names=({names}))'


class RankLayout:
    """A DP x TP x PP (x CP x EP) layout of ranks, its groups, and their placement on nodes.

    Build with distlab.mesh.layout(). Sizes: tp, cp, ep, dp, pp; `order` the full tuple of the
    five dimensions, fastest first; `strides[d]` the rank distance between neighbours along d.
    """

    def __init__(self, *, tp=1, cp=1, ep=1, dp=1, pp=1, order=DEFAULT_ORDER, gpus_per_node=8):
        sizes = {}
        for name, value in (("tp", tp), ("cp", cp), ("ep", ep), ("dp", dp), ("pp", pp)):
            sizes[name] = positive_int(value, name)
        self.order = parse_order(order)
        given = _listed(order)
        missing = [d for d in self.order if d not in given and sizes[d] > 1]
        if missing:
            raise ConfigurationError(
                f"order={order!r} leaves out {', '.join(f'{d}={sizes[d]}' for d in missing)}; "
                f"name every dimension of size > 1 (e.g. {DEFAULT_ORDER!r})"
            )
        world = math.prod(sizes.values())
        if world > MAX_WORLD_SIZE:
            raise ConfigurationError(f"{world:,} GPUs is more than this model handles ({MAX_WORLD_SIZE:,})")
        self.sizes = sizes
        self.world_size = world
        self.gpus_per_node = positive_int(gpus_per_node, "gpus_per_node", high=MAX_WORLD_SIZE)
        stride, strides = 1, {}
        for d in self.order:
            strides[d] = stride
            stride *= sizes[d]
        self.strides = strides
        self._grid = None

    # -- basic properties ------------------------------------------------------------------
    @property
    def tp(self) -> int:
        return self.sizes["tp"]

    @property
    def cp(self) -> int:
        return self.sizes["cp"]

    @property
    def ep(self) -> int:
        return self.sizes["ep"]

    @property
    def dp(self) -> int:
        return self.sizes["dp"]

    @property
    def pp(self) -> int:
        return self.sizes["pp"]

    @property
    def order_string(self) -> str:
        """The order of the dimensions of size > 1 (or 'tp' for one GPU), fastest first."""
        used = [d for d in self.order if self.sizes[d] > 1]
        return "-".join(used) if used else "tp"

    @property
    def active_dims(self) -> tuple:
        """Dimensions of size > 1, in order (fastest first)."""
        return tuple(d for d in self.order if self.sizes[d] > 1)

    @property
    def nodes(self) -> int:
        """Nodes used: ceil(world / gpus_per_node) (the last one may be partly used)."""
        return -(-self.world_size // self.gpus_per_node)

    def _grid_array(self) -> np.ndarray:
        """Ranks as an array with one axis per dimension in REVERSED order (axis -1 = fastest)."""
        if self._grid is None:
            shape = [self.sizes[d] for d in reversed(self.order)]
            dtype = np.int32 if self.world_size < 2**31 else np.int64
            self._grid = np.arange(self.world_size, dtype=dtype).reshape(shape)
            self._grid.flags.writeable = False
        return self._grid

    def _axis(self, d: str) -> int:
        return len(self.order) - 1 - self.order.index(d)

    # -- rank <-> coordinates ---------------------------------------------------------------
    def _check_rank(self, rank) -> int:
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or not 0 <= int(rank) < self.world_size:
            raise ConfigurationError(f"rank={rank!r} is out of range; valid: 0 to {self.world_size - 1}")
        return int(rank)

    def coords(self, rank) -> dict:
        """{dimension: coordinate} of a rank, e.g. {'tp': 1, 'cp': 0, 'ep': 0, 'dp': 0, 'pp': 2}."""
        r = self._check_rank(rank)
        return {d: (r // self.strides[d]) % self.sizes[d] for d in DIMENSIONS}

    def rank(self, **coords) -> int:
        """The rank at the given coordinates (missing ones are 0)."""
        total = 0
        for d, c in coords.items():
            if d not in DIMENSIONS:
                raise ConfigurationError(f"unknown dimension {d!r}; valid: {', '.join(DIMENSIONS)}")
            if isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 0 <= int(c) < self.sizes[d]:
                raise ConfigurationError(f"{d}={c!r} is out of range; valid: 0 to {self.sizes[d] - 1}")
            total += int(c) * self.strides[d]
        return total

    def coordinate_array(self, d: str) -> np.ndarray:
        """Coordinate along dimension d of every rank (an int array of length world_size)."""
        (dim,) = _dims(d, self.order)
        ranks = np.arange(self.world_size)
        return (ranks // self.strides[dim]) % self.sizes[dim]

    # -- groups -----------------------------------------------------------------------------
    def groups(self, dims) -> np.ndarray:
        """The groups of a dimension ('tp', 'dp', ...) or of several together ('dp-cp'), as a
        read-only int array (number of groups, group size), listed as Megatron-LM lists them."""
        chosen = _dims(dims, self.order)
        grid = self._grid_array()
        rest = [self._axis(d) for d in reversed(self.order) if d not in chosen]  # slowest first
        inner = [self._axis(d) for d in reversed(self.order) if d in chosen]  # slowest first
        size = math.prod(self.sizes[d] for d in chosen)
        result = np.ascontiguousarray(grid.transpose(rest + inner)).reshape(-1, size)
        result.flags.writeable = False
        return result

    def group_of(self, rank, dims) -> list:
        """The ranks of rank's group of dimension(s) dims (a sorted list)."""
        r = self._check_rank(rank)
        chosen = _dims(dims, self.order)
        c = self.coords(r)
        base = r - sum(c[d] * self.strides[d] for d in chosen)
        members = np.array([base])
        for d in chosen:
            members = (members[:, None] + np.arange(self.sizes[d])[None, :] * self.strides[d]).ravel()
        return sorted(int(m) for m in members)

    def group_index(self, dims) -> np.ndarray:
        """For every rank, the index of its group in groups(dims) (an int array of length world_size)."""
        table = self.groups(dims)
        index = np.empty(self.world_size, dtype=np.int64)
        index[table.ravel()] = np.repeat(np.arange(table.shape[0]), table.shape[1])
        return index

    # -- placement ----------------------------------------------------------------------------
    def node_of(self, rank) -> int:
        return self._check_rank(rank) // self.gpus_per_node

    def node_ids(self) -> np.ndarray:
        """Node of every rank: rank // gpus_per_node."""
        return np.arange(self.world_size) // self.gpus_per_node

    def nodes_spanned(self, dims) -> np.ndarray:
        """Number of distinct nodes each group of dims spans (an int array, one per group)."""
        nodes = np.sort(self.groups(dims) // self.gpus_per_node, axis=1)
        return 1 + np.count_nonzero(np.diff(nodes, axis=1), axis=1)

    def crosses_nodes(self, dims) -> np.ndarray:
        """Whether each group of dims spans more than one node (a bool array, one per group)."""
        return self.nodes_spanned(dims) > 1

    def link_kind(self, dims) -> str:
        """'intra-node' when every group of dims stays inside a node, 'inter-node' when every group
        crosses nodes, 'mixed' otherwise (then the slowest group, across nodes, sets the pace)."""
        crossing = self.crosses_nodes(dims)
        if not crossing.any():
            return "intra-node"
        return "inter-node" if crossing.all() else "mixed"

    def link_for(self, dims, intra="nvlink4", inter="ib-ndr"):
        """The link a dimension's collectives run on: `intra` when every group stays inside a node,
        otherwise `inter` (a ring that crosses nodes anywhere runs at its slowest hop)."""
        return intra if self.link_kind(dims) == "intra-node" else inter

    def warnings(self) -> list:
        """Plain-language warnings about the placement (empty when nothing is off)."""
        out = []
        g = self.gpus_per_node
        if self.tp > 1:
            crossing = int(self.crosses_nodes("tp").sum())
            if crossing:
                n_groups = self.world_size // self.tp
                reason = (
                    f"tp={self.tp} is more than the {g} GPUs of a node"
                    if self.tp > g
                    else f"tp={self.tp} does not divide the {g} GPUs of a node"
                    if g % self.tp
                    else f"in order {self.order_string!r} TP neighbours are {self.strides['tp']} ranks apart"
                )
                out.append(
                    wrap_text(
                        f"TP leaves the node: {crossing} of {n_groups} TP groups span several nodes ({reason}); "
                        f"their 4 all-reduces per layer would run on the inter-node link. Put tp first in the "
                        f"order and keep tp a divisor of {g}.",
                        WARNING_WIDTH,
                    )
                )
        for d in ("cp", "ep"):
            if self.sizes[d] > 1 and self.crosses_nodes(d).any():
                out.append(f"{d.upper()} groups span several nodes: their collectives run on the inter-node link.")
        if self.world_size % g and self.world_size > g:
            out.append(f"{self.world_size} GPUs do not fill whole nodes of {g}: the last node is only partly used.")
        return out

    # -- torch ----------------------------------------------------------------------------
    def device_mesh(self, include_trivial: bool = False) -> DeviceMeshSpec:
        """mesh_shape and mesh_dim_names for torch's init_device_mesh (outermost dimension first).

        Leaves out dimensions of size 1 unless include_trivial (a one-GPU world keeps 'tp').
        torch.arange(world).reshape(mesh_shape): moving a dimension's axis last and reshaping to
        (-1, size) gives exactly groups(dim).
        """
        dims = [d for d in reversed(self.order) if include_trivial or self.sizes[d] > 1] or ["tp"]
        return DeviceMeshSpec(tuple(self.sizes[d] for d in dims), tuple(dims))

    # -- reports ----------------------------------------------------------------------------
    def describe(self, max_groups: int = 8) -> str:
        """Several lines: sizes and order, the groups of each dimension, and where they run."""
        sizes = " x ".join(f"{d} {self.sizes[d]}" for d in self.active_dims) or "tp 1"
        lines = [
            f"{self.world_size} GPUs = {sizes}; order {self.order_string} (leftmost varies fastest); "
            f"{self.gpus_per_node} GPUs per node, {self.nodes} node{'s' if self.nodes > 1 else ''}"
        ]
        for d in ("tp", "cp", "ep", "dp", "pp"):
            table = self.groups(d)
            shown = [_format_group(row) for row in table[:max_groups].tolist()]
            more = [f"... ({table.shape[0] - max_groups} more)"] if table.shape[0] > max_groups else []
            if self.sizes[d] == 1:
                if d in ("tp", "dp", "pp"):
                    lines.append(f"{d}: size 1 (every GPU is its own {d.upper()} group)")
                continue
            crossing = int(self.crosses_nodes(d).sum())
            where = {
                "intra-node": "each inside one node",
                "inter-node": "each across nodes",
                "mixed": f"{crossing} cross nodes",
            }[self.link_kind(d)]
            lines.append(_packed(f"{d}: {table.shape[0]} groups of {self.sizes[d]}, {where}:", shown + more))
        spec = self.device_mesh()
        lines.append("torch: " + spec.code())
        lines.extend("warning: " + w for w in self.warnings())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{d}={self.sizes[d]}" for d in DIMENSIONS)
        return f"RankLayout({sizes}, order={'-'.join(self.order)!r}, gpus_per_node={self.gpus_per_node})"

    def to_dict(self, include_groups: bool = True) -> dict:
        """Plain numbers, strings and lists (JSON-ready)."""
        spec = self.device_mesh()
        data = {
            "world_size": self.world_size,
            "sizes": dict(self.sizes),
            "order": "-".join(self.order),
            "strides": dict(self.strides),
            "gpus_per_node": self.gpus_per_node,
            "nodes": self.nodes,
            "device_mesh": {"mesh_shape": list(spec.mesh_shape), "mesh_dim_names": list(spec.mesh_dim_names)},
            "warnings": self.warnings(),
            "dimensions": {},
        }
        for d in DIMENSIONS:
            entry = {
                "size": self.sizes[d],
                "groups_count": self.world_size // self.sizes[d],
                "link": self.link_kind(d),
                "groups_crossing_nodes": int(self.crosses_nodes(d).sum()),
            }
            if include_groups:
                entry["groups"] = self.groups(d).tolist()
            data["dimensions"][d] = entry
        return data


def _packed(head: str, items: list, width: int = TEXT_WIDTH, indent: str = "    ") -> str:
    """`head` and the `items` after it, a space apart, on lines of at most `width` characters where they fit: an item
    that would pass the width starts an indented line (a group of ranks is never broken)."""
    lines = [head]
    for item in items:
        if len(lines[-1]) + 1 + len(item) <= width:
            lines[-1] += " " + item
        else:
            lines.append(indent + item)
    return "\n".join(lines)


def _format_group(ranks: list, limit: int = 8) -> str:
    """'[0, 1, 2]', or '[0, 16, 32, ..., 1008]' for a long group."""
    if len(ranks) <= limit:
        return "[" + ", ".join(map(str, ranks)) + "]"
    return "[" + ", ".join(map(str, ranks[: limit - 2])) + f", ..., {ranks[-1]}]"


def layout(gpus=None, *, tp=1, pp=1, dp=None, cp=1, ep=1, order=DEFAULT_ORDER, gpus_per_node=8) -> RankLayout:
    """A rank layout of `gpus` GPUs (or of dp x tp x pp x cp x ep when gpus is None).

    dp defaults to gpus / (tp x pp x cp x ep), which must be a whole number. order: Megatron-LM's
    order string, leftmost fastest (default 'tp-cp-ep-dp-pp'). gpus_per_node: GPUs per node for
    the placement (consecutive ranks share a node).

    Lesson 6 §1-§5.

    >>> l = layout(16, tp=2, pp=4)  # Megatron-LM's 16-GPU example (parallel_state docstring)
    >>> l.dp, l.group_of(0, 'dp'), l.group_of(0, 'pp')
    (2, [0, 2], [0, 4, 8, 12])
    """
    model = math.prod(positive_int(v, n) for n, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep)))
    if gpus is None:
        if dp is None:
            raise ConfigurationError("give the number of GPUs (gpus=, --gpus) or the data-parallel degree (dp=, --dp)")
        return RankLayout(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp, order=order, gpus_per_node=gpus_per_node)
    n = positive_int(gpus, "gpus")
    factors = [(name, int(v)) for name, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep)) if v != 1]
    if len(factors) == 1:
        expr = f"{factors[0][0]}={factors[0][1]}"
    else:
        expr = (
            (" x ".join(name for name, _ in factors) + " = " + " x ".join(str(v) for _, v in factors) + f" = {model}")
            if factors
            else "1"
        )
    if dp is None:
        if n % model:
            below, above = (n // model) * model, (n // model + 1) * model
            shown = ", ".join(str(v) for v in (below, above) if v > 0)
            raise ConfigurationError(
                f"gpus={n} is not a multiple of {expr}: the data-parallel degree gpus / {model} must be a whole "
                f"number; valid gpus near it: {shown}"
            )
        dp = n // model
    elif positive_int(dp, "dp") * model != n:
        raise ConfigurationError(
            f"dp={dp} with {expr} makes {dp * model} GPUs, not gpus={n}; leave dp out to derive it"
        )
    return RankLayout(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp, order=order, gpus_per_node=gpus_per_node)


def expert_layout(gpus, *, tp=1, pp=1, cp=1, ep=1, etp=None, order=DEFAULT_ORDER, gpus_per_node=8) -> RankLayout:
    """The rank layout of the expert (MoE) layers: Megatron-LM's second rank generator.

    Megatron-LM (megatron/core/parallel_state.py, initialize_model_parallel) lays the expert layers out
    on the same ranks with their own sizes: tp = etp (expert tensor parallelism, default the dense tp),
    ep, dp = edp = gpus / (etp x ep x pp), pp, cp = 1, in the same order string. Its groups are the expert
    groups: groups('ep') the expert-parallel groups (the all-to-all), groups('tp') expert TP, groups('dp')
    expert data parallelism (the expert gradients' reduction). Megatron requires the pipeline groups of
    both layouts to be equal, and, unless the order ends with pp, equal data-parallel degrees; both are
    checked here. Lesson 10 §6.

    >>> e = expert_layout(16, tp=2, ep=4, etp=1)  # attention TP 2, experts over 4 GPUs, no expert TP
    >>> e.group_of(0, 'ep'), e.group_of(0, 'dp')
    ([0, 1, 2, 3], [0, 4, 8, 12])
    """
    n = positive_int(gpus, "gpus")
    dense = layout(n, tp=tp, pp=pp, cp=cp, order=order, gpus_per_node=gpus_per_node)
    etp = dense.tp if etp is None else positive_int(etp, "etp")
    ep = positive_int(ep, "ep")
    size = etp * ep * dense.pp
    if n % size:
        raise ConfigurationError(
            f"etp x ep x pp = {etp} x {ep} x {dense.pp} = {size} does not divide gpus={n}: the expert data-parallel "
            f"degree gpus / (etp x ep x pp) must be a whole number"
        )
    experts = RankLayout(tp=etp, ep=ep, dp=n // size, pp=dense.pp, order=order, gpus_per_node=gpus_per_node)
    if dense.pp > 1 and experts.order[-1] != "pp" and experts.dp != dense.dp:
        raise ConfigurationError(
            f"order {order!r} does not end with pp, so the expert layers need the dense data-parallel degree "
            f"{dense.dp}, not {experts.dp} (Megatron-LM's rule); put pp last"
        )
    if not np.array_equal(experts.groups("pp"), dense.groups("pp")):
        raise ConfigurationError(
            f"with order {order!r} the expert layout's pipeline groups differ from the dense layout's "
            f"(Megatron-LM requires them equal); put pp last, e.g. {DEFAULT_ORDER!r}"
        )
    return experts
