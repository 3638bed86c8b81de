"""distlab.dataparallel: ZeRO memory (the paper's Table 1), communication per step, bucketed overlap.

Notation: Psi parameters, N data-parallel GPUs, M the gradient bytes of the shard a GPU owns,
alpha latency per step, B bandwidth per direction. GB = 1e9 bytes.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from distlab import collectives, dataparallel as D, memory, models
from distlab.errors import ConfigurationError, DistlabError, UnknownNameError

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ----------------------------------------------------------------------------------------
# Memory: Rajbhandari et al. 2020 (ZeRO), Table 1, "Per-device memory consumption of different
# optimizations in ZeRO-DP as a function of DP degree", 7.5B model, in GB, columns P_os (ZeRO-1),
# P_os+g (ZeRO-2), P_os+g+p (ZeRO-3). Baseline DP is 120 GB at every degree (16 x 7.5).
TABLE_1_7_5B = {
    1: ("120", "120", "120"),
    4: ("52.5", "41.3", "30"),
    16: ("35.6", "21.6", "7.5"),
    64: ("31.4", "16.6", "1.88"),
    256: ("30.4", "15.4", "0.47"),
    1024: ("30.1", "15.1", "0.12"),
}


def _matches_printed(value: float, printed: str) -> bool:
    """value rounds to `printed` at the printed precision (half a unit of the last digit, round-half-up)."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(value - float(printed)) <= 0.5 * 10**-decimals + 1e-9


@pytest.mark.parametrize("dp", sorted(TABLE_1_7_5B))
def test_zero_paper_table_1_for_the_7_5b_model(dp):
    curves = D.memory_per_gpu_curves(7.5e9, [dp])
    assert curves[0][0] == pytest.approx(120e9)  # plain DP: 16 x 7.5e9 at any degree
    for stage, printed in zip((1, 2, 3), TABLE_1_7_5B[dp]):
        gb = memory.training_memory(7.5e9, zero=stage, dp=dp).total_bytes / 1e9
        assert _matches_printed(gb, printed), (stage, dp, gb, printed)
        assert curves[stage][0] / 1e9 == pytest.approx(gb, rel=1e-12)  # the NumPy path agrees


def test_table_rounding_helper_is_strict():
    # 41.25 prints as 41.3 (half up), but 41.2 or 41.4 would not match
    assert _matches_printed(41.25, "41.3") and not _matches_printed(41.2, "41.4")
    assert not _matches_printed(0.5, "0.47") and _matches_printed(0.46875, "0.47")


def test_smallest_fitting_stage_on_8_h100():
    # megatron-gpt-18.4b, Psi = 18.45e9 over 8 GPUs: plain DP 16 Psi = 295 GB; ZeRO-1 (4 + 12/8) Psi
    # = 101 GB; ZeRO-2 (2 + 14/8) Psi = 69.2 GB <= 80 GB.
    assert D.smallest_fitting_stage("megatron-gpt-18.4b", 8, "h100-sxm") == 2
    # llama2-7b, Psi = 6.74e9: ZeRO-1 5.5 Psi = 37 GB fits, plain DP 108 GB does not.
    assert D.smallest_fitting_stage("llama2-7b", 8, "h100-sxm") == 1
    # llama2-70b, Psi = 69e9: even ZeRO-3 needs 2 Psi = 138 GB per GPU.
    assert D.smallest_fitting_stage("llama2-70b", 8, "h100-sxm") is None
    # 1.6e9 parameters x 16 B = 25.6 GB: plain DP fits a 40 GB A100.
    assert D.smallest_fitting_stage(1.6e9, 1, "a100-40gb") == 0


# ----------------------------------------------------------------------------------------
# Communication per step


def test_gradient_bytes_is_the_shard_a_gpu_owns():
    # 7e9 x 2 B = 14 GB; with tp=2, pp=4 the GPU owns 7e9/8 parameters: 1.75 GB; fp32: 4 B each.
    assert D.gradient_bytes(7e9) == pytest.approx(14e9)
    assert D.gradient_bytes(7e9, tp=2, pp=4) == pytest.approx(1.75e9)
    assert D.gradient_bytes(7e9, precision="fp32") == pytest.approx(28e9)
    llama = models.model("llama2-7b")
    assert D.gradient_bytes("llama2-7b") == pytest.approx(2 * llama.parameter_count())


@pytest.mark.parametrize("zero, factor", [(0, 2), (1, 2), (2, 2), (3, 3)])
def test_communication_volume_per_stage_exact(zero, factor):
    # ZeRO paper Sec. 7.2: 2M for DP, ZeRO-1, ZeRO-2; 3M for ZeRO-3. M = 14 GB, N = 8: on a ring a GPU
    # sends (N-1)/N of each reduce-scatter or all-gather: 2 x 7/8 x 14 = 24.5 GB, 3 x 7/8 x 14 = 36.75 GB.
    comm = D.step_communication(7e9, zero=zero, dp=8)
    assert comm.gradient_bytes == 14e9
    assert comm.volume_factor == factor and D.volume_factor(zero) == factor
    assert comm.volume_bytes == factor * 14e9
    assert comm.bytes_sent_per_gpu == pytest.approx(factor * 7 / 8 * 14e9, rel=1e-15)
    assert comm.time_s is None  # no link given: bytes only


def test_zero3_moves_exactly_1_5x_plain_dp_and_zero12_the_same():
    for n in (2, 8, 64, 1000):
        dp = D.step_communication(70e9, zero=0, dp=n).bytes_sent_per_gpu
        assert D.step_communication(70e9, zero=1, dp=n).bytes_sent_per_gpu == pytest.approx(dp, rel=1e-15)
        assert D.step_communication(70e9, zero=2, dp=n).bytes_sent_per_gpu == pytest.approx(dp, rel=1e-15)
        assert D.step_communication(70e9, zero=3, dp=n).bytes_sent_per_gpu == pytest.approx(1.5 * dp, rel=1e-15)


def test_step_time_on_a_link():
    # M = 14 GB, N = 8, B = 50 GB/s, alpha = 10 us.
    # DP: one all-reduce, 14 alpha + 24.5 GB / B = 140 us + 490 ms.
    # ZeRO-1: reduce-scatter + all-gather, 7 alpha + 12.25 GB / B each: the same total.
    # ZeRO-3: three collectives of 7 alpha + 12.25 GB / B: 210 us + 735 ms.
    kw = dict(dp=8, bandwidth="50 GB/s", latency="10 us")
    assert D.step_communication(7e9, zero=0, **kw).time_s == pytest.approx(140e-6 + 0.49, rel=1e-12)
    assert D.step_communication(7e9, zero=1, **kw).time_s == pytest.approx(140e-6 + 0.49, rel=1e-12)
    z3 = D.step_communication(7e9, zero=3, **kw)
    assert z3.time_s == pytest.approx(210e-6 + 0.735, rel=1e-12)
    assert z3.phase_names == (
        "parameter all-gather (forward)",
        "parameter all-gather (backward)",
        "gradient reduce-scatter",
    )
    assert [p.op for p in z3.phases] == ["all-gather", "all-gather", "reduce-scatter"]
    named = D.step_communication(7e9, zero=0, dp=8, link="IB-NDR")
    assert named.link == "ib-ndr"
    assert named.time_s == pytest.approx(collectives.collective_cost("all-reduce", 14e9, 8, link="ib-ndr").time_s)


def test_one_gpu_sends_nothing():
    for zero in range(4):
        comm = D.step_communication(7e9, zero=zero, dp=1, link="nvlink4")
        assert comm.bytes_sent_per_gpu == 0 and comm.time_s == 0


@given(
    params=st.floats(1e6, 1e13),
    zero=st.sampled_from([0, 1, 2, 3]),
    dp=st.integers(1, 4096),
    tp=st.sampled_from([1, 2, 8]),
    pp=st.sampled_from([1, 4]),
    precision=st.sampled_from(["mixed", "fp32", "fp8"]),
)
@FAST
def test_bytes_sent_are_the_volume_times_the_ring_share(params, zero, dp, tp, pp, precision):
    comm = D.step_communication(params, zero=zero, dp=dp, tp=tp, pp=pp, precision=precision, bandwidth=1e11, latency=0)
    m = memory.model_state_bytes(params, precision, 0, 1, tp, pp)[1]
    assert comm.gradient_bytes == pytest.approx(m, rel=1e-15)
    assert D.volume_factor(zero) * (dp - 1) / dp * m == pytest.approx(comm.bytes_sent_per_gpu, rel=1e-12, abs=1e-6)
    # alpha = 0: the time is the bytes over the bandwidth, phase by phase
    assert comm.time_s == pytest.approx(comm.bytes_sent_per_gpu / 1e11, rel=1e-12, abs=1e-15)
    assert comm.bytes_sent_per_gpu <= comm.volume_bytes * (1 + 1e-12)


def test_to_dict_and_text():
    comm = D.step_communication(7e9, zero=3, dp=8, link="ib-ndr")
    d = json.loads(json.dumps(comm.to_dict()))
    assert d["stage"] == "ZeRO-3" and d["volume_factor"] == 3 and d["bytes_sent_per_gpu"] == pytest.approx(36.75e9)
    assert [p["name"] for p in d["phases"]][2] == "gradient reduce-scatter"
    text = str(comm)
    assert "ZeRO-3 over 8 GPUs" in text and "3 x M = 42 GB" in text and "ib-ndr" in text


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(zero=4), ConfigurationError, "valid: 0, 1, 2, 3"),
        (dict(zero=True), ConfigurationError, "ZeRO stage"),
        (dict(dp=0), ConfigurationError, "dp"),
        (dict(dp=2.5), ConfigurationError, "dp"),
        (dict(tp=0), ConfigurationError, "tp"),
        (dict(link="nvlink9"), UnknownNameError, "closest"),
        (dict(precision="int3"), UnknownNameError, "precision"),
    ],
)
def test_invalid_communication_inputs(kwargs, error, words):
    args = dict(zero=0, dp=8)
    args.update(kwargs)
    with pytest.raises(error, match=words) as info:
        D.step_communication(7e9, **args)
    assert isinstance(info.value, DistlabError)
    with pytest.raises(ConfigurationError, match="params"):
        D.step_communication(-1, zero=0, dp=8)


# ----------------------------------------------------------------------------------------
# Overlap with backward


def _loop_timeline(ready, comm):
    """The recurrence written as a loop: start_i = max(ready_i, end_{i-1}), end_i = start_i + comm_i."""
    start, end, last = [], [], 0.0
    for r, c in zip(ready, comm):
        s = max(r, last)
        last = s + c
        start.append(s)
        end.append(last)
    return np.array(start), np.array(end)


def test_overlap_four_buckets_by_hand():
    # Backward 200 ms, communication 250 ms in 4 buckets: each 62.5 ms, ready at 50, 100, 150, 200 ms.
    # Starts 50, 112.5, 175, 237.5; ends 112.5, 175, 237.5, 300: 100 ms exposed = 250 - (3/4) 200.
    start, end = D.overlap_timeline([50, 100, 150, 200], [62.5] * 4)
    assert np.allclose(start, [50, 112.5, 175, 237.5]) and np.allclose(end, [112.5, 175, 237.5, 300])
    assert D.exposed_communication_time(250.0, 200.0, 4) == pytest.approx(100.0)
    timeline = D.bucketed_overlap(1e9, 0.2, 2, buckets=4, bandwidth=1e9 / 0.25, latency=0)
    # 1 GB over 2 GPUs: all-reduce sends 2 x 1/2 x M = 1 GB in all, 0.25 s at 4 GB/s: 62.5 ms per bucket
    assert np.allclose(timeline.comm_s, 0.0625) and timeline.exposed_s == pytest.approx(0.1)
    assert timeline.hidden_s == pytest.approx(0.15) and timeline.step_s == pytest.approx(0.3)


def test_overlap_only_the_last_bucket_shows_when_communication_is_short():
    # Backward 300 ms, 120 ms in 8 buckets: 15 ms each, ready every 37.5 ms: each ends before the next is
    # ready, so only the last bucket (ready at 300 ms) is exposed: 15 ms.
    assert D.exposed_communication_time(0.120, 0.300, 8) == pytest.approx(0.015)
    ready = [0.300 * (i + 1) / 8 for i in range(8)]
    start, end = D.overlap_timeline(ready, [0.015] * 8)
    assert np.allclose(start, ready) and end[-1] == pytest.approx(0.315)


def test_one_bucket_overlaps_nothing():
    assert D.exposed_communication_time(0.5, 10.0, 1) == 0.5
    t = D.bucketed_overlap(14e9, 1.0, 8, link="ib-ndr")
    assert t.buckets == 1 and t.exposed_s == pytest.approx(t.comm_total_s) and t.hidden_s == 0
    assert t.start_s[0] == 1.0  # it starts when backward ends


@given(ready=st.lists(st.floats(0, 10), min_size=1, max_size=30), seed=st.integers(0, 2**31))
@FAST
def test_vectorised_timeline_equals_the_loop(ready, seed):
    ready = np.sort(np.array(ready))
    comm = np.random.default_rng(seed).uniform(0, 2, size=ready.size)
    start, end = D.overlap_timeline(ready, comm)
    start_loop, end_loop = _loop_timeline(ready, comm)
    assert np.allclose(start, start_loop, rtol=1e-12, atol=1e-12)
    assert np.allclose(end, end_loop, rtol=1e-12, atol=1e-12)


@given(comm=st.floats(0, 10), backward=st.floats(0, 10), buckets=st.integers(1, 200))
@FAST
def test_closed_form_equals_the_per_bucket_timeline(comm, backward, buckets):
    ready = backward * np.arange(1, buckets + 1) / buckets
    _, end = _loop_timeline(ready, np.full(buckets, comm / buckets))
    exposed = max(0.0, end[-1] - backward)
    fast = D.exposed_communication_time(comm, backward, buckets)
    assert fast == pytest.approx(exposed, rel=1e-9, abs=1e-12)
    # never less than the last bucket nor than what does not fit under backward, never more than all of it
    assert fast >= comm / buckets - 1e-12 and fast >= comm - backward - 1e-12 and fast <= comm + 1e-12


@given(
    m=st.floats(1e6, 1e12),
    backward=st.floats(0, 5),
    dp=st.integers(1, 512),
    buckets=st.integers(1, 64),
    alpha=st.floats(0, 1e-4),
)
@FAST
def test_bucketed_overlap_with_a_link_matches_the_closed_form(m, backward, dp, buckets, alpha):
    t = D.bucketed_overlap(m, backward, dp, buckets=buckets, bandwidth=5e10, latency=alpha)
    per_bucket = collectives.ring_all_reduce_time(m / buckets, dp, 5e10, alpha)
    assert t.comm_s == pytest.approx(np.full(buckets, per_bucket), rel=1e-12, abs=1e-15)
    assert t.exposed_s == pytest.approx(
        D.exposed_communication_time(buckets * per_bucket, backward, buckets), rel=1e-9, abs=1e-12
    )
    assert t.hidden_s + t.exposed_s == pytest.approx(t.comm_total_s, rel=1e-9, abs=1e-12)


def test_more_buckets_hide_more_until_latency_bites():
    # alpha = 0: exposed = max(C/B, C - (B-1)/B T) never grows with B.
    exposed = [D.bucketed_overlap(14e9, 1.0, 8, buckets=b, bandwidth=50e9).exposed_s for b in (1, 2, 4, 16, 256)]
    assert all(b <= a + 1e-15 for a, b in zip(exposed, exposed[1:]))
    # alpha = 1 ms, N = 8: each all-reduce pays 14 ms of latency; 1000 buckets cost 14 s of latency
    # alone, far more than the 0.49 s of bandwidth time: the timeline is communication-bound.
    many = D.bucketed_overlap(14e9, 1.0, 8, buckets=1000, bandwidth=50e9, latency=1e-3)
    few = D.bucketed_overlap(14e9, 1.0, 8, buckets=8, bandwidth=50e9, latency=1e-3)
    assert many.comm_total_s == pytest.approx(1000 * 14e-3 + 0.49)
    assert many.exposed_s > 10 * few.exposed_s


def test_bucket_size_makes_a_smaller_last_bucket():
    # 60 MiB of gradients in 25 MiB buckets: 25, 25, 10 MiB, ready at 25/60, 50/60 and 60/60 of backward.
    mib = 2**20
    t = D.bucketed_overlap(60 * mib, 0.6, 4, bucket_size="25 MiB", bandwidth=1e9)
    assert t.bucket_bytes.tolist() == [25 * mib, 25 * mib, 10 * mib]
    assert np.allclose(t.ready_s, [0.25, 0.5, 0.6])
    # ring all-reduce over 4: 2 x 3/4 of each bucket at 1 GB/s
    assert np.allclose(t.comm_s, 1.5 * t.bucket_bytes / 1e9)
    assert D.DDP_BUCKET_BYTES == 25 * mib
    zero = D.bucketed_overlap(0, 1.0, 8, bucket_size="25 MiB", bandwidth=1e9)
    assert zero.buckets == 0 and zero.exposed_s == 0


def test_reduce_scatter_buckets_for_zero2():
    # ZeRO-2 reduce-scatters the gradients: (N-1)/N x M per GPU, half the all-reduce.
    rs = D.bucketed_overlap(8e9, 1.0, 8, buckets=4, bandwidth=1e10, op="reduce-scatter")
    ar = D.bucketed_overlap(8e9, 1.0, 8, buckets=4, bandwidth=1e10)
    assert rs.comm_total_s == pytest.approx(ar.comm_total_s / 2)


def test_overlap_result_dict_and_text():
    t = D.bucketed_overlap(14e9, 0.8, 8, buckets=4, link="ib-ndr")
    d = json.loads(json.dumps(t.to_dict()))
    assert d["buckets"] == 4 and d["exposed_s"] == pytest.approx(t.exposed_s) and len(d["end_s"]) == 4
    assert "4 buckets" in str(t) and "exposed" in str(t)
    assert math.isfinite(t.step_s)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(buckets=0), "buckets"),
        (dict(buckets=2.5), "buckets"),
        (dict(buckets=True), "buckets"),
        (dict(buckets=2, bucket_size="1 MB"), "not both"),
        (dict(bucket_size="0 MB"), "bucket_size must be positive"),
        (dict(bucket_size="1 B"), "at most"),
        (dict(buckets=10**7), "more than"),
        (dict(op="all-gather"), "reduce-scatter"),
        (dict(backward_time=-1), "backward_time"),
        (dict(size="1 GB/s"), "size"),
        (dict(dp=0), "dp"),
    ],
)
def test_invalid_overlap_inputs(kwargs, words):
    args = dict(size=14e9, backward_time=1.0, dp=8, bandwidth=1e10)
    args.update(kwargs)
    with pytest.raises(DistlabError, match=words):
        D.bucketed_overlap(args.pop("size"), args.pop("backward_time"), args.pop("dp"), **args)


def test_invalid_curve_inputs():
    with pytest.raises(ConfigurationError, match="dps"):
        D.memory_per_gpu_curves(7e9, [0, 1])
    with pytest.raises(ConfigurationError, match="dps"):
        D.memory_per_gpu_curves(7e9, [1.5])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(buckets=float("nan")), "buckets=nan must be a whole number"),
        (dict(buckets=float("inf")), "buckets=inf must be a whole number"),
        (dict(bucket_size=1e-300), "at most 1,000,000: use a bigger bucket"),  # 1e9 / 1e-300 overflows to inf
        (dict(buckets=4, bandwidth=1e-300), "not a finite number"),
    ],
)
def test_bucketed_overlap_refuses_out_of_range_inputs(kwargs, message):
    # our message, never ValueError / OverflowError from int(nan) or ceil(inf), nor an inf timeline
    link = {} if "bandwidth" in kwargs else dict(link="ib-ndr")
    with pytest.raises(ConfigurationError, match=message):
        D.bucketed_overlap(1e9, 0.1, 8, **link, **kwargs)


def test_bucketed_overlap_grad_bytes_is_the_old_name_of_size():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = D.bucketed_overlap(size=14e9, backward_time=0.8, dp=8, buckets=4, link="ib-ndr")
    with pytest.warns(DeprecationWarning, match="grad_bytes=.*use size="):
        got = D.bucketed_overlap(grad_bytes=14e9, backward_time=0.8, dp=8, buckets=4, link="ib-ndr")
    assert got.to_dict() == want.to_dict()


def test_overlap_timeline_says_why_communication_is_exposed():
    # one bucket: ready only when backward ends; many small buckets on a fast link: only the last shows;
    # a slow link: the buckets queue up (communication-bound). Without overlap = backward + all communication.
    one = D.bucketed_overlap(1e9, 0.5, 8, link="nvlink4", buckets=1)
    assert one.exposure == "one bucket" and one.no_overlap_s == pytest.approx(0.5 + one.comm_total_s)
    fast = D.bucketed_overlap(1e9, 0.5, 8, link="nvlink4", buckets=16)
    assert fast.exposure == "last bucket"
    slow = D.bucketed_overlap(1e9, 0.01, 8, link="ethernet-100g", buckets=16)
    assert slow.exposure == "communication-bound"
