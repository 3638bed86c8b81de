"""distlab.mesh: rank layouts are bijections, groups partition the ranks, Megatron-LM's documented
example is reproduced exactly, placement on nodes decides which link a group uses, and the torch
DeviceMesh expression gives the same groups."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import mesh
from distlab.errors import ConfigurationError

# Megatron-LM, megatron/core/parallel_state.py, initialize_model_parallel docstring: "16 GPUs ... 2 GPUs
# to parallelize the model tensor, and 4 GPUs to parallelize the model pipeline":
MEGATRON_DP = [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11], [12, 14], [13, 15]]
MEGATRON_TP = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]
MEGATRON_PP = [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]


def test_megatron_documented_example_exactly():
    lay = mesh.layout(16, tp=2, pp=4)
    assert (lay.dp, lay.world_size) == (2, 16)
    assert lay.groups("tp").tolist() == MEGATRON_TP
    assert lay.groups("dp").tolist() == MEGATRON_DP
    assert lay.groups("pp").tolist() == MEGATRON_PP
    # "adjacent ranks are on the same DGX box": on 8-GPU nodes TP and DP stay inside, PP crosses
    assert lay.link_kind("tp") == "intra-node" and lay.link_kind("dp") == "intra-node"
    assert lay.link_kind("pp") == "inter-node" and lay.crosses_nodes("pp").all()
    assert lay.warnings() == []


def test_megatron_generate_masked_orthogonal_rank_groups_docstring_example():
    # parallel_size = [tp, dp, pp] = [2, 3, 4], dp groups: [0, 2, 4], [1, 3, 5], ..., [19, 21, 23]
    lay = mesh.layout(tp=2, dp=3, pp=4, order="tp-dp-pp")
    groups = lay.groups("dp").tolist()
    assert groups[0] == [0, 2, 4] and groups[1] == [1, 3, 5] and groups[-1] == [19, 21, 23] and len(groups) == 8
    # and its 'tp-pp-dp' example of 8 GPUs, sizes 2-2-2: dp groups [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert mesh.layout(tp=2, pp=2, dp=2, order="tp-pp-dp").groups("dp").tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_mit_quiz_gpu_count():
    # MIT 6.5940 ch. 7 quiz: T=4, P=4, D=16 -> 256 GPUs and 4 pipeline stages
    lay = mesh.layout(tp=4, pp=4, dp=16)
    assert lay.world_size == 256 and lay.groups("pp").shape == (64, 4)


sizes = st.sampled_from([1, 2, 3, 4])
orders = st.permutations(list(mesh.DIMENSIONS)).map("-".join)


@settings(max_examples=60, deadline=None)
@given(
    tp=sizes, cp=sizes, ep=st.sampled_from([1, 2]), dp=sizes, pp=sizes, order=orders, g=st.sampled_from([1, 2, 4, 8])
)
def test_layout_is_a_bijection_and_groups_partition(tp, cp, ep, dp, pp, order, g):
    lay = mesh.RankLayout(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp, order=order, gpus_per_node=g)
    world = lay.world_size
    coords = [lay.coords(r) for r in range(world)]
    assert [lay.rank(**c) for c in coords] == list(range(world))  # rank -> coords -> rank
    assert len({tuple(c.values()) for c in coords}) == world  # coords are distinct
    for d in mesh.DIMENSIONS:
        table = lay.groups(d)
        assert table.shape == (world // lay.sizes[d], lay.sizes[d])
        assert sorted(table.ravel().tolist()) == list(range(world))  # a partition
        for row in table.tolist():
            # members differ only along d, and are sorted by their coordinate along d
            others = {tuple(v for k, v in coords[r].items() if k != d) for r in row}
            assert len(others) == 1 and [coords[r][d] for r in row] == list(range(lay.sizes[d]))
        assert lay.group_of(row[-1], d) == sorted(row)
        assert (lay.group_index(d)[table] == np.arange(table.shape[0])[:, None]).all()
        assert np.array_equal(lay.coordinate_array(d), [c[d] for c in coords])
    # combined groups: the union of the dimensions
    combo = lay.groups("dp-cp")
    assert combo.shape[1] == dp * cp and sorted(combo.ravel().tolist()) == list(range(world))


def test_strides_follow_the_order_leftmost_fastest():
    lay = mesh.layout(tp=2, cp=3, dp=2, pp=2)  # default tp-cp-ep-dp-pp
    assert lay.strides == {"tp": 1, "cp": 2, "ep": 6, "dp": 6, "pp": 12}
    assert lay.coords(13) == {"tp": 1, "cp": 0, "ep": 0, "dp": 0, "pp": 1}
    assert lay.groups("cp").tolist()[:2] == [[0, 2, 4], [1, 3, 5]]
    assert lay.order_string == "tp-cp-dp-pp"


def test_reversed_order_sends_tp_across_nodes_with_a_warning():
    lay = mesh.layout(64, tp=8, pp=2, order="pp-dp-tp", gpus_per_node=8)
    assert lay.group_of(0, "tp") == [0, 8, 16, 24, 32, 40, 48, 56]
    assert lay.nodes_spanned("tp").tolist() == [8] * 8
    assert lay.link_kind("tp") == "inter-node" and lay.link_kind("pp") == "intra-node"
    (warning,) = lay.warnings()
    assert "TP leaves the node: 8 of 8 TP groups" in warning and "8 ranks apart" in warning
    good = mesh.layout(64, tp=8, pp=2, gpus_per_node=8)
    assert good.link_kind("tp") == "intra-node" and good.link_kind("dp") == "inter-node"
    assert (good.link_for("tp"), good.link_for("dp"), lay.link_for("tp", "nvlink5", "ib-xdr")) == (
        "nvlink4",
        "ib-ndr",
        "ib-xdr",
    )


@pytest.mark.parametrize(
    "tp, g, words", [(16, 8, "tp=16 is more than the 8 GPUs"), (3, 8, "tp=3 does not divide the 8")]
)
def test_tp_groups_that_do_not_fit_a_node_are_flagged(tp, g, words):
    lay = mesh.layout(tp * 8, tp=tp, gpus_per_node=g)
    assert lay.crosses_nodes("tp").any()
    assert any(words in " ".join(w.split()) for w in lay.warnings())  # a warning is broken over lines


def test_mixed_crossing_and_partial_nodes():
    # tp=3 on 8-GPU nodes: [0,1,2], [3,4,5] inside node 0, [6,7,8] crosses
    lay = mesh.layout(24, tp=3, gpus_per_node=8)
    assert lay.crosses_nodes("tp").tolist() == [False, False, True, False, False, True, False, False]
    assert lay.link_kind("tp") == "mixed"
    assert any("do not fill whole nodes" in w for w in mesh.layout(12, tp=2, gpus_per_node=8).warnings())
    assert mesh.layout(6, tp=2).nodes == 1 and mesh.layout(6, tp=2).warnings() == []


def test_device_mesh_shape_and_names_are_outermost_first():
    spec = mesh.layout(16, tp=2, pp=4).device_mesh()
    assert spec.mesh_shape == (4, 2, 2) and spec.mesh_dim_names == ("pp", "dp", "tp")
    assert spec.code() == 'init_device_mesh("cuda", (4, 2, 2), mesh_dim_names=("pp", "dp", "tp"))'
    full = mesh.layout(16, tp=2, pp=4).device_mesh(include_trivial=True)
    assert full.mesh_dim_names == ("pp", "dp", "ep", "cp", "tp") and full.mesh_shape == (4, 2, 1, 1, 2)
    assert mesh.layout(1).device_mesh().mesh_shape == (1,)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(gpus=16, tp=2, pp=4),
        dict(gpus=48, tp=2, cp=2, pp=3),
        dict(gpus=32, tp=2, ep=2, pp=2, order="tp-ep-pp-dp"),
        dict(gpus=24, tp=4, pp=3, order="pp-tp-dp"),
    ],
)
def test_torch_arange_reshape_reproduces_our_groups(kwargs):
    torch = pytest.importorskip("torch")
    lay = mesh.layout(**kwargs)
    spec = lay.device_mesh()
    grid = torch.arange(lay.world_size).reshape(spec.mesh_shape)  # how init_device_mesh lays out ranks
    for axis, name in enumerate(spec.mesh_dim_names):
        groups = grid.movedim(axis, -1).reshape(-1, spec.mesh_shape[axis])
        assert groups.tolist() == lay.groups(name).tolist()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: mesh.layout(16, tp=3), "gpus=16 is not a multiple of tp=3"),
        (lambda: mesh.layout(17, tp=2, pp=4), "not a multiple of tp x pp = 2 x 4 = 8: the data-parallel degree"),
        (lambda: mesh.layout(16, tp=2, pp=4, dp=4), "dp=4 with tp x pp = 2 x 4 = 8 makes 32 GPUs, not gpus=16"),
        (lambda: mesh.layout(tp=2), "give the number of GPUs"),
        (lambda: mesh.layout(16, tp=2, order="tp-xp"), "unknown dimension 'xp'"),
        (lambda: mesh.layout(16, tp=2, order="tp-dp-tp"), "names tp more than once"),
        (lambda: mesh.layout(16, tp=2, pp=2, order="tp-dp"), "leaves out pp=2"),
        (lambda: mesh.layout(16, tp=2, order=""), "must be a string"),
        (lambda: mesh.layout(16, tp=0), "tp=0 must be a positive whole number"),
        (lambda: mesh.layout(16, gpus_per_node=0), "gpus_per_node=0"),
        (lambda: mesh.layout(16).coords(16), "rank=16 is out of range; valid: 0 to 15"),
        (lambda: mesh.layout(16, tp=2).rank(tp=2), "tp=2 is out of range; valid: 0 to 1"),
        (lambda: mesh.layout(16).groups("xx"), "unknown dimension 'xx'"),
        (lambda: mesh.layout(tp=2**12, dp=2**12, pp=2), "more than this model handles"),
    ],
)
def test_invalid_layouts_raise_our_error(call, words):
    with pytest.raises(ConfigurationError) as info:
        call()
    assert words in str(info.value)


def test_order_may_leave_out_size_one_dimensions():
    lay = mesh.layout(16, tp=2, pp=4, order="tp-dp-pp")
    assert lay.order == ("tp", "dp", "pp", "cp", "ep")
    assert lay.groups("dp").tolist() == MEGATRON_DP


def test_large_layout_is_fast_and_consistent():
    lay = mesh.layout(16384, tp=8, pp=16, cp=2)
    assert lay.dp == 64 and lay.nodes == 2048
    for d in ("tp", "cp", "dp", "pp"):
        table = lay.groups(d)
        assert np.array_equal(np.sort(table.ravel()), np.arange(16384))
    assert not lay.crosses_nodes("tp").any() and lay.crosses_nodes("dp").all()
    data = lay.to_dict(include_groups=False)
    assert data["dimensions"]["dp"]["groups_count"] == 256 and "groups" not in data["dimensions"]["dp"]
    text = lay.describe(max_groups=2)
    assert "dp: 256 groups of 64, each across nodes: [0, 16, 32, 48, 64, 80, ..., 1008]" in text


def test_describe_and_dict():
    lay = mesh.layout(16, tp=2, pp=4)
    text = lay.describe()
    assert "tp: 8 groups of 2, each inside one node: [0, 1] [2, 3]" in text
    assert "pp: 4 groups of 4, each across nodes: [0, 4, 8, 12]" in text
    data = lay.to_dict()
    assert data["dimensions"]["pp"]["groups"] == MEGATRON_PP and data["device_mesh"]["mesh_shape"] == [4, 2, 2]
    assert "RankLayout(tp=2, cp=1, ep=1, dp=2, pp=4" in repr(lay)


def test_every_permutation_of_three_dims_gives_the_same_group_sets_up_to_relabelling():
    # whatever the order, each dimension has world/size groups of `size` GPUs; only which GPUs change
    for order in itertools.permutations(("tp", "dp", "pp")):
        lay = mesh.layout(24, tp=2, pp=3, order="-".join(order))
        assert {d: lay.groups(d).shape for d in ("tp", "dp", "pp")} == {"tp": (12, 2), "dp": (6, 4), "pp": (8, 3)}


# --- the expert layout (Lesson 10 §6) ---------------------------------------------------------------


def _megatron_groups(sizes, order, chosen):
    """An independent implementation of Megatron-LM's documented rule (parallel_state.py,
    generate_masked_orthogonal_rank_groups, equations (1) and (2) of its docstring): with order d1-d2-...
    (d1 fastest) global_rank = sum_i c_i x prod_{j<i} s_j; a group fixes the coordinates outside `chosen`
    (its index enumerates them, fastest first) and runs over the chosen ones (fastest first)."""
    import itertools

    dims = order.split("-")
    stride = {}
    acc = 1
    for d in dims:
        stride[d] = acc
        acc *= sizes[d]
    inner = [d for d in dims if d in chosen]
    outer = [d for d in dims if d not in chosen]

    def combos(names):  # fastest (first) name varies fastest
        ranges = [range(sizes[d]) for d in reversed(names)]
        return [dict(zip(reversed(names), c)) for c in itertools.product(*ranges)]

    return [
        [sum(o[d] * stride[d] for d in outer) + sum(i[d] * stride[d] for d in inner) for i in combos(inner)]
        for o in combos(outer)
    ]


def test_megatron_rule_reproduces_its_documented_examples():
    # generate_masked_orthogonal_rank_groups docstring: [tp, dp, pp] = [2, 3, 4], dp groups
    groups = _megatron_groups({"tp": 2, "dp": 3, "pp": 4}, "tp-dp-pp", ["dp"])
    assert groups[0] == [0, 2, 4] and groups[1] == [1, 3, 5] and groups[7] == [19, 21, 23]
    # ... and order tp-pp-dp, sizes 2-2-2: dp groups [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert _megatron_groups({"tp": 2, "pp": 2, "dp": 2}, "tp-pp-dp", ["dp"]) == [[0, 4], [1, 5], [2, 6], [3, 7]]


@pytest.mark.parametrize(
    "gpus, tp, pp, ep, etp",
    [
        (16, 2, 1, 4, 1),
        (16, 2, 1, 4, 2),
        (64, 2, 2, 8, 1),
        (64, 4, 2, 4, 2),
        (128, 1, 4, 8, 1),
        (32, 8, 1, 2, 4),
    ],
)
def test_expert_layout_equals_megatron_expert_generator(gpus, tp, pp, ep, etp):
    e = mesh.expert_layout(gpus, tp=tp, pp=pp, ep=ep, etp=etp)
    # Megatron: RankGenerator(tp=etp, ep=ep, dp=gpus/(etp ep pp), pp=pp, cp=1, order="tp-cp-ep-dp-pp")
    sizes = {"tp": etp, "cp": 1, "ep": ep, "dp": gpus // (etp * ep * pp), "pp": pp}
    for dims in (["ep"], ["tp"], ["dp"], ["pp"], ["tp", "ep"]):
        assert e.groups("-".join(dims)).tolist() == _megatron_groups(sizes, "tp-cp-ep-dp-pp", dims), dims
    # Megatron's assertion: the pipeline groups of the dense and the expert generator are equal
    assert e.groups("pp").tolist() == mesh.layout(gpus, tp=tp, pp=pp).groups("pp").tolist()


def test_expert_layout_refuses_what_megatron_refuses():
    with pytest.raises(ConfigurationError, match="etp x ep x pp"):
        mesh.expert_layout(16, tp=2, ep=3, etp=1)
    with pytest.raises(ConfigurationError, match="put pp last"):
        mesh.expert_layout(16, tp=2, pp=2, ep=4, etp=1, order="tp-pp-ep-dp")


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.integers(-2, 256),
    tp=st.integers(0, 8),
    pp=st.integers(0, 8),
    ep=st.integers(0, 16),
    etp=st.one_of(st.none(), st.integers(0, 8)),
)
def test_fuzz_expert_layout_partitions_the_ranks_or_refuses(gpus, tp, pp, ep, etp):
    try:
        e = mesh.expert_layout(gpus, tp=tp, pp=pp, ep=ep, etp=etp)
    except ConfigurationError:
        return
    for d in ("tp", "ep", "dp", "pp"):
        assert sorted(e.groups(d).ravel().tolist()) == list(range(gpus))
