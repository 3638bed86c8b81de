"""DDP, FSDP2 and HSDP in real PyTorch (gloo, 4 CPU processes) against distlab.fsdp (lesson 11 §2). Skipped
without torch. Byte counts and collective counts are deterministic, so they are asserted exactly."""

import pytest

from distlab.verify import TORCH_MESSAGE, torch_available

if not torch_available():
    pytest.skip(TORCH_MESSAGE, allow_module_level=True)

from distlab.errors import ConfigurationError  # noqa: E402
from distlab.verify.sharding import measure_sharding  # noqa: E402


@pytest.fixture(scope="module")
def measured():
    # 3 linear layers of 16 x 16 + 16: P = 3 x 272 = 816 parameters; 4 ranks, HSDP as 2 'nodes' of 2
    return measure_sharding(world=4, per_node=2, layers=3, width=16, steps=2)


def test_each_rank_holds_what_distlab_predicts(measured):
    # fp32: DDP 4 x 816 = 3,264 B on every rank; FSDP2 / 4 = 816; HSDP / 2 = 1,632; Adam's two moments 2x that
    expected = {"ddp": 3264, "fsdp": 816, "hsdp": 1632}
    for mode, run in measured.runs.items():
        assert run.param_bytes == (expected[mode],) * 4 == (measured.predicted_param_bytes(mode),) * 4
        assert run.optimizer_bytes == (2 * expected[mode],) * 4


def test_one_step_runs_the_predicted_collectives_in_the_predicted_order(measured):
    for mode in ("fsdp", "hsdp"):
        run = measured.runs[mode]
        counts = {op: run.count(op) for op in ("all-gather", "reduce-scatter", "all-reduce")}
        assert counts == measured.predicted_collectives(mode)  # 2L-1 = 5, L = 3, HSDP's all-reduces L = 3
        assert run.kinds() == measured.predicted_order()
        # every all-gather and reduce-scatter buffer is one layer in fp32 (272 x 4 B) over its shard group;
        # HSDP's all-reduce carries the 1/2 shard over the 2 replicas
        group = 4 if mode == "fsdp" else 2
        for op, size, members in run.collectives:
            assert (size, members) == ((544, 2) if op == "all-reduce" else (1088, group))


def test_the_three_ways_train_the_same_model(measured):
    ddp = measured.runs["ddp"].losses
    for mode in ("fsdp", "hsdp"):
        assert measured.runs[mode].losses == pytest.approx(ddp, rel=1e-5)
    assert ddp[1] < ddp[0]


def test_bad_layouts_are_refused_before_starting():
    with pytest.raises(ConfigurationError, match="per_node"):
        measure_sharding(world=4, per_node=3)
    with pytest.raises(ConfigurationError, match="width"):
        measure_sharding(width=10)
    with pytest.raises(ConfigurationError, match="modes"):
        measure_sharding(modes=("zero",))
