"""plan(partial_recompute=True): every 'full' row that fits is priced at the fewest layers per chunk that still fit
(distlab.planner_recompute; issue 30 follow-up)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import hardware, memory, memory_recipes, models, planner, planner_recompute, training
from distlab.errors import ConfigurationError
from distlab.step import step_model_array

DEGREES = ("dp", "tp", "cp", "pp", "chunks", "micro_batch_size", "zero", "recompute", "sequence_parallel", "schedule")


def _usable(node: str, recipe: str = "zero-paper") -> float:
    return hardware.cluster(node, 1).accelerator.memory_bytes - memory_recipes.memory_recipe(recipe).reserve_bytes


def _estimate(case: dict, row: dict, n):
    return training.estimate(
        case["model"], case["node"], nodes=case["nodes"], global_batch=case["global_batch"],
        seq_len=case["seq_len"], recompute_layers=n, **{k: row[k] for k in DEGREES},
    )  # fmt: skip


def _plans(case: dict):
    given_ = dict(nodes=case["nodes"], global_batch=case["global_batch"], seq_len=case["seq_len"])
    default = planner.plan(case["model"], case["node"], **given_)
    return default, planner.plan(case["model"], case["node"], **given_, partial_recompute=True)


CASES = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["llama2-7b", "llama3.1-8b", "megatron-gpt-3.6b", "megatron-gpt-7.5b"]),
        "node": st.sampled_from(["dgx-a100", "dgx-h100"]),
        "nodes": st.sampled_from([1, 2, 4, 8]),
        "global_batch": st.sampled_from([16, 64, 256]),
        "seq_len": st.sampled_from([2048, 4096, 8192]),
    }
)


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=CASES, pick=st.randoms(use_true_random=False))
def test_partial_rows_are_estimates_that_fit_with_the_fewest_layers(case, pick):
    default, p = _plans(case)
    usable = _usable(case["node"])
    n = p.columns["recompute_layers"]
    partial = np.flatnonzero(n != planner_recompute.NOT_PARTIAL)
    # the other rows are the default plan's, bit for bit; only 'full' rows that fit at every layer are repriced
    others = np.setdiff1d(np.arange(len(p)), partial)
    for key in ("step_time_s", "memory_bytes", "mfu"):
        assert np.array_equal(p.results[key][others], default.results[key][others])
    assert np.all(p.columns["recompute_code"][partial] == 2) and np.all(
        default.results["memory_bytes"][partial] <= usable
    )
    assert np.all(p.results["step_time_s"][partial] <= default.results["step_time_s"][partial])
    position = {int(i): r for r, i in enumerate(p.order)}
    for i in pick.sample(list(partial), min(6, partial.size)):
        row, full = p.row(position[int(i)]), default.row(int(np.flatnonzero(default.order == i)[0]))
        layers = row["recompute_layers"]
        assert (
            1 <= layers < planner_recompute.chunk_layers(models.model(case["model"]).layers, row["pp"], row["chunks"])
        )
        est = _estimate(case, row, layers)
        assert np.isclose(est.step_time_s, row["step_time_s"], rtol=1e-9, atol=0)
        assert np.isclose(est.memory.total_bytes, row["memory_per_gpu_bytes"], rtol=1e-9, atol=0)
        assert est.memory.total_bytes <= usable and row["step_time_s"] <= full["step_time_s"]
        if layers > 1:  # N = 1 is the least searched (N = 0 is the layout's 'none' row)
            assert _estimate(case, row, layers - 1).memory.total_bytes > usable
    best = default.row(0)["step_time_s"] if default.feasible_count else np.inf
    assert (p.row(0)["step_time_s"] if p.feasible_count else np.inf) <= best
    assert p.feasible_count == default.feasible_count  # a 'full' row fits with N exactly when it fits with all


def test_a_known_layout_needs_exactly_17_layers():
    """Llama 2 7B on one DGX H100 (84,943,715,696.64 B usable with the ZeRO paper's count), 64 sequences of 4,096
    tokens, dp 8 x tp 1 x pp 1, micro-batch 8 (one microbatch in flight), ZeRO-3, full recomputation.
    memory.py's per-layer figures at b = 8: a recomputed layer keeps its input, 8 x 33,554,432 = 268,435,456 B; a
    kept one (flash attention: the selective count) 8 x 538,968,064 = 4,311,744,512 B. Model states: 16 B x
    6,738,415,616 parameters / 8 = 13,476,831,232 B. With N of the 32 layers recomputed:
        13,476,831,232 + N x 268,435,456 + (32 - N) x 4,311,744,512 <= 84,943,715,696.64
        151,452,655,616 - N x 4,043,309,056 <= 84,943,715,696.64  ->  N >= 16.45, so N = 17:
    N = 16 needs 86,759,710,720 B (too much), N = 17 needs 82,716,401,664 B."""
    model = models.model("llama2-7b")
    kept = memory.activation_bytes_per_layer(model, 8, 4096, recompute="selective")
    again = memory.activation_bytes_per_layer(model, 8, 4096, recompute="full")
    state = 16 * model.parameter_count() / 8
    assert (kept, again, state) == (4_311_744_512, 268_435_456, 13_476_831_232)
    needs = [state + n * again + (32 - n) * kept for n in (16, 17)]
    assert needs == [86_759_710_720, 82_716_401_664] and needs[1] <= _usable("dgx-h100") < needs[0]

    p = planner.plan(model, "dgx-h100", nodes=1, global_batch=64, seq_len=4096, partial_recompute=True)
    c = p.columns
    (i,) = np.flatnonzero((c["dp"] == 8) & (c["micro_batch_size"] == 8) & (c["zero"] == 3) & (c["recompute_code"] == 2))
    assert c["recompute_layers"][i] == 17 and p.results["memory_bytes"][i] == needs[1]
    row = p.row(int(np.flatnonzero(p.order == i)[0]))
    assert row["recompute"] == "full" and row["recompute_layers"] == 17 and row["fits"]


def _swept(model, node, nodes, global_batch, seq_len, **options):
    """(the keywords plan() priced every candidate with, the columns, N per chunk most) of its 'full' rows."""
    seen = {}

    def spy(core_model, keywords, out, usable):
        seen.update(model=core_model, keywords=keywords)
        return out, np.full(np.asarray(out["memory_bytes"]).size, planner_recompute.NOT_PARTIAL)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(planner_recompute, "fewest_recomputed_layers", spy)
        planner.plan(model, node, nodes=nodes, global_batch=global_batch, seq_len=seq_len, partial_recompute=True,
                     **options)  # fmt: skip
    full = np.flatnonzero(np.asarray(seen["keywords"]["recompute_code"]) == 2)
    size = np.asarray(seen["keywords"]["dp"]).size
    keywords = {
        key: value[full] if isinstance(value, np.ndarray) and value.shape == (size,) else value
        for key, value in seen["keywords"].items()
    }
    top = planner_recompute.chunk_layers(seen["model"].layers, keywords["pp"], keywords["chunks"])
    return seen["model"], keywords, top


@pytest.mark.parametrize(
    "model, options",
    [
        ("llama2-7b", {}),
        ("llama3.1-8b", dict(memory_recipe="fsdp2", precision="fp8")),
        ("megatron-gpt-7.5b", dict(memory_recipe="megatron", tp_overlap=True)),
        ("llama2-7b", dict(memory_recipe="deepspeed", zero3_collectives="tensor", efficiency=0.5)),
    ],
)
def test_memory_falls_and_time_rises_with_every_layer_recomputed(model, options):
    """The search's premise, on every 'full' candidate of a plan (interleaving, ZeRO, CP, SP, engines' recipes):
    from N = 0 to every layer, the memory per GPU never rises and the step time never falls, so the smallest N
    that fits is the fastest that fits."""
    core, keywords, top = _swept(model, "dgx-h100", 2, 64, 8192, **options)
    previous = None
    for n in range(int(top.max()) + 1):
        out = step_model_array(core, **keywords, recompute_layers=np.minimum(n, top))
        if previous is not None:
            assert np.all(out["memory_bytes"] <= previous["memory_bytes"])
            assert np.all(out["step_time_s"] >= previous["step_time_s"] * (1 - 1e-12))
        previous = out
    every = step_model_array(core, **keywords)  # None: every layer, the default plan's pricing
    assert np.array_equal(previous["memory_bytes"], every["memory_bytes"])
    assert np.allclose(previous["step_time_s"], every["step_time_s"], rtol=1e-12, atol=0)


def test_rows_table_and_json_say_the_layers():
    p = planner.plan("llama2-7b", "dgx-h100", nodes=1, global_batch=64, seq_len=4096, partial_recompute=True)
    rows = p.top(len(p))
    assert all("recompute_layers" in r for r in rows)
    assert {r["recompute"] for r in rows if r["recompute_layers"] is not None} == {"full"}
    assert "full:17" in p.table(len(p)) and p.extra["partial_recompute"] is True
    default = planner.plan("llama2-7b", "dgx-h100", nodes=1, global_batch=64, seq_len=4096)
    assert "recompute_layers" not in default.row(0) and "full:" not in default.table(len(default))


def test_an_moe_plan_keeps_full_at_every_layer():
    """Partial recomputation is modelled for dense models only: an MoE model's plan with partial_recompute=True is
    its default plan, each row's recompute_layers None (plan()'s docstring says so)."""
    given_ = dict(nodes=2, global_batch=64, seq_len=4096)
    default = planner.plan("mixtral-8x7b", "dgx-h100", **given_)
    p = planner.plan("mixtral-8x7b", "dgx-h100", **given_, partial_recompute=True)
    assert np.array_equal(p.results["step_time_s"], default.results["step_time_s"])
    assert np.array_equal(p.order, default.order)
    assert all(r["recompute_layers"] is None for r in p.top(50))


@pytest.mark.parametrize("value", [2, -1, "yes", None, 0.5, np.array([True])])
def test_partial_recompute_takes_true_or_false(value):
    with pytest.raises(ConfigurationError, match="partial_recompute"):
        planner.plan("llama2-7b", "dgx-h100", nodes=1, global_batch=8, partial_recompute=value)
