"""distlab.verify without PyTorch: the alpha-beta fit, and the error a student gets when torch is missing."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distlab.collectives import ring_all_reduce_time
from distlab.errors import ConfigurationError, DistlabError, MissingDependencyError
from distlab.verify import allreduce
from distlab.verify import (
    TORCH_MESSAGE,
    AlphaBetaFit,
    compare_pipeline_orders,
    fit_alpha_beta,
    measure_activations,
    measure_all_reduce,
    measure_model_state,
    torch_available,
    torch_pipeline_orders,
)

SIZES = np.array([4.0**k * 1024 for k in range(9)])


def test_fit_recovers_alpha_and_beta_from_exact_ring_times():
    # Noise-free times from distlab's own formula: the least-squares solution is exact, so the
    # tolerance is float rounding (the 1/t weights and lstsq lose a few ulps).
    times = ring_all_reduce_time(SIZES, 2, 1.5e9, 1.2e-4)
    fit = fit_alpha_beta(SIZES, times, 2)
    assert fit.alpha_s == pytest.approx(1.2e-4, rel=1e-9)
    assert fit.beta_bytes_per_s == pytest.approx(1.5e9, rel=1e-9)
    assert fit.r2_log == pytest.approx(1.0, abs=1e-12)
    assert fit.predict(SIZES, 4) == pytest.approx(ring_all_reduce_time(SIZES, 4, 1.5e9, 1.2e-4), rel=1e-9)


def test_fit_over_several_group_sizes_at_once():
    ns = np.repeat([2, 3, 4], SIZES.size)
    sizes = np.tile(SIZES, 3)
    fit = fit_alpha_beta(sizes, ring_all_reduce_time(sizes, ns, 3e9, 5e-5), ns)
    assert (fit.alpha_s, fit.beta_bytes_per_s) == (pytest.approx(5e-5, rel=1e-9), pytest.approx(3e9, rel=1e-9))
    assert fit.world_sizes == (2, 3, 4) and fit.points == 27


@given(alpha=st.floats(1e-7, 1e-2), beta=st.floats(1e6, 1e12), n=st.integers(2, 64))
def test_fit_recovers_any_positive_alpha_and_beta(alpha, beta, n):
    # Property: over any latency/bandwidth mix the weighted fit is exact up to float rounding.
    # rel 1e-6 leaves room for the conditioning of the 2x2 system when one term is ~1e6x the other
    # over the whole sweep (then that parameter is barely determined by the data).
    times = ring_all_reduce_time(SIZES, n, beta, alpha)
    fit = fit_alpha_beta(SIZES, times, n)
    assert fit.predict(SIZES, n) == pytest.approx(times, rel=1e-6)
    latency_share = 2 * (n - 1) * alpha / times
    if latency_share.max() > 1e-3:  # alpha visible in the data somewhere
        assert fit.alpha_s == pytest.approx(alpha, rel=1e-3)
    if latency_share.min() < 1 - 1e-3:  # beta visible somewhere
        assert fit.beta_bytes_per_s == pytest.approx(beta, rel=1e-3)


def test_fit_clamps_a_negative_latency_to_zero():
    # Pure bandwidth, with the smallest message made slightly fast: an unconstrained fit gives alpha < 0.
    times = ring_all_reduce_time(SIZES, 2, 2e9, 0.0)
    times[0] *= 0.5
    fit = fit_alpha_beta(SIZES, times, 2)
    assert fit.alpha_s == 0.0
    assert 1e9 < fit.beta_bytes_per_s < 4e9


@pytest.mark.parametrize(
    "sizes, times, n, match",
    [
        (SIZES, SIZES[::-1] * 1e-9, 2, "do not grow"),
        (SIZES[:1], [1e-3], 2, "at least 2"),
        (SIZES, -np.ones(9), 2, "positive and finite"),
        (SIZES, np.ones(9), 1, "n=\\[1.0\\]"),
        (SIZES, np.ones(9), 2.5, "whole numbers"),
    ],
)
def test_fit_rejects_bad_data(sizes, times, n, match):
    with pytest.raises(ConfigurationError, match=match):
        fit_alpha_beta(sizes, times, n)


def test_shared_cpu_prediction_divides_the_bandwidth_by_processes_per_core():
    fit = AlphaBetaFit(1e-4, 1e9, 1.0, 9, (2,))
    assert fit.predict_shared_cpu(SIZES, 2, cores=2) == pytest.approx(fit.predict(SIZES, 2))
    # N = 4 on 2 cores: each process has half a core, so the bandwidth term doubles
    expected = ring_all_reduce_time(SIZES, 4, 0.5e9, 1e-4)
    assert fit.predict_shared_cpu(SIZES, 4, cores=2) == pytest.approx(expected)


@pytest.mark.parametrize(
    "platform, interfaces, expected",
    [
        ("darwin", [(1, "lo0"), (4, "en0")], "lo0"),  # macOS and the BSDs: lo0
        ("freebsd14", [(1, "em0"), (2, "lo0")], "lo0"),
    ],
)
def test_loopback_interface_by_platform(monkeypatch, platform, interfaces, expected):
    monkeypatch.setattr(allreduce.sys, "platform", platform)
    monkeypatch.setattr(allreduce.socket, "if_nameindex", lambda: interfaces)
    assert allreduce._loopback_interface() == expected


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_no_loopback_interface_is_our_error(monkeypatch, platform):
    monkeypatch.setattr(allreduce.sys, "platform", platform)
    monkeypatch.setattr(allreduce.socket, "if_nameindex", lambda: [(2, "eth0")])
    monkeypatch.setattr(allreduce, "_ipv4_of", lambda name: "10.0.0.5")
    with pytest.raises(DistlabError, match="no network interface carrying 127.0.0.1 \\(interfaces: eth0\\)"):
        allreduce._loopback_interface()


def _cgroup(tmp_path, membership, files):
    tmp_path.mkdir()
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "self_cgroup").write_text(membership)
    return allreduce._cgroup_cpu_limit(tmp_path, tmp_path / "self_cgroup")


def test_cgroup_quota_is_read_from_v2_and_v1_files(tmp_path):
    # v2: the smallest quota from the process's cgroup up to the root counts (here the parent's 1.5 CPUs)
    assert (
        _cgroup(tmp_path / "a", "0::/box/job\n", {"box/cpu.max": "150000 100000\n", "box/job/cpu.max": "max 100000\n"})
        == 1.5
    )
    # v1: quota / period; -1 means no quota
    assert (
        _cgroup(
            tmp_path / "b",
            "3:cpu,cpuacct:/\n",
            {"cpu,cpuacct/cpu.cfs_quota_us": "250000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
        )
        == 2.5
    )
    assert (
        _cgroup(
            tmp_path / "c",
            "3:cpu,cpuacct:/\n",
            {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
        )
        is None
    )
    assert _cgroup(tmp_path / "d", "", {}) is None


@pytest.mark.parametrize("limit, expected", [(None, 8.0), (2.5, 2.5), (16.0, 8.0)])
def test_usable_cores_is_the_affinity_capped_by_the_quota(monkeypatch, limit, expected):
    monkeypatch.setattr(allreduce.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(allreduce, "_cgroup_cpu_limit", lambda: limit)
    assert allreduce.usable_cores() == expected


def test_import_distlab_verify_does_not_import_torch():
    code = "import sys, distlab; distlab.verify.fit_alpha_beta; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize(
    "call",
    [
        lambda: measure_model_state(),
        lambda: measure_activations(),
        lambda: measure_all_reduce(),
        lambda: torch_pipeline_orders("1f1b", 4, 8),
        lambda: compare_pipeline_orders("gpipe", 2, 2),
    ],
)
def test_without_torch_every_measurement_says_how_to_install_it(monkeypatch, call):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(MissingDependencyError) as info:
        call()
    # the README's command (distlab is not on PyPI, so 'distlab[torch]' cannot be installed by name)
    assert "pip install torch==2.13.0" in str(info.value) and "distlab[torch]" not in str(info.value)
    assert str(info.value) == TORCH_MESSAGE
    assert isinstance(info.value, DistlabError) and isinstance(info.value, ImportError)
    assert not torch_available()
