"""All-reduce on a real torch.distributed process group (gloo, processes on 127.0.0.1), and an alpha-beta fit.

What runs: torch's ProcessGroupGloo hands a dense CPU all-reduce to ``gloo::allreduce``, whose
default algorithm is a ring (gloo/allreduce.cc): a reduce-scatter then an all-gather, N-1 steps
each, every rank sending M/N bytes per step to one neighbour and receiving from the other. Each
rank's share is cut into segments of at most 1 MiB (at least two per rank) with two in flight,
so sending overlaps the CPU's summing. That is the ring of distlab.collectives:

    t = 2(N-1) alpha + 2(N-1)/N * M / beta

with alpha the per-step latency and beta the bandwidth per direction. On one machine the "link"
is the kernel copying bytes through loopback TCP sockets, and the CPU also does the sums, so
beta is an effective copy-and-add rate, not a wire speed, and N processes share the machine's
cores. (gloo also ships ring-chunked, halving-doubling and BCube all-reduce classes, which
Caffe2 chose among by size; ProcessGroupGloo's CPU all-reduce calls gloo::allreduce, whose
default is the ring; the torch 2.13 CPU build has no shared-memory shortcut.)

``fit_alpha_beta`` needs only NumPy; ``measure_all_reduce`` needs PyTorch.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..collectives import ring_all_reduce_time
from ..errors import ConfigurationError, DistlabError
from ..units import format_bytes, format_rate, format_seconds
from ._forked import start_ranks
from ._torch import require_torch

#: Message sizes of the default sweep: 2^10 to 2^26 bytes (1.02 kB to 67.1 MB), a factor 4 apart.
DEFAULT_SIZES = tuple(4**k * 1024 for k in range(9))

#: Set to a rank to make that worker fail on purpose once its group is joined (tests only).
FAIL_RANK_ENV = "DISTLAB_TEST_ALLREDUCE_FAIL_RANK"


def default_repeats(size_bytes: int) -> int:
    """Timed repetitions per size: more for small messages (cheap, noisy), fewer for large ones."""
    return 15 if size_bytes <= 64 * 1024 else 7 if size_bytes <= 1024 * 1024 else 5 if size_bytes <= 4 << 20 else 3


@dataclass(frozen=True)
class AlphaBetaFit:
    """alpha (s per step) and beta (bytes/s per direction) of the ring model, fitted to measured times."""

    alpha_s: float
    beta_bytes_per_s: float
    r2_log: float  # coefficient of determination of log(time), on the fitted points
    points: int
    world_sizes: tuple

    def predict(self, size_bytes, n):
        """Ring all-reduce time (s) of distlab.collectives.ring_all_reduce_time with these alpha and beta."""
        return ring_all_reduce_time(size_bytes, n, self.beta_bytes_per_s, self.alpha_s)

    def predict_shared_cpu(self, size_bytes, n, cores):
        """The ring prediction when n processes share `cores` CPU cores (fit made with one core each).

        Every byte is copied and summed by a CPU, so with n > cores each process gets cores/n of
        a core: beta becomes beta * cores / n. Same formula, ring_all_reduce_time. alpha is kept:
        this model has no term for a woken process waiting for a free core, which also lengthens
        every step when n > cores.
        """
        share = min(1.0, cores / n)
        return ring_all_reduce_time(size_bytes, n, self.beta_bytes_per_s * share, self.alpha_s)

    def summary(self) -> str:
        on = ", ".join(f"N = {n}" for n in self.world_sizes)
        return (
            f"alpha = {format_seconds(self.alpha_s)} per step, beta = {format_rate(self.beta_bytes_per_s)} "
            f"per direction (fitted on {on}, {self.points} points; R^2 of log time = {self.r2_log:.3f})"
        )


def fit_alpha_beta(sizes_bytes, times_s, n) -> AlphaBetaFit:
    """Least-squares alpha >= 0 and beta > 0 of t = 2(N-1) alpha + 2(N-1)/N M / beta.

    The model is linear in (alpha, 1/beta). Residuals are weighted by 1/t (relative error), so a
    sweep over four orders of magnitude of M is fitted at every size, not only at the largest.
    A negative alpha (latency lost in noise) is clamped to 0 and 1/beta refitted. `n` is one group
    size or one per point.
    """
    m = np.asarray(sizes_bytes, dtype=float).ravel()
    t = np.asarray(times_s, dtype=float).ravel()
    n = np.broadcast_to(np.asarray(n, dtype=float), m.shape).ravel()
    if m.size < 2 or t.size != m.size:
        raise ConfigurationError(
            f"need at least 2 (size, time) pairs of equal length; got {m.size} sizes, {t.size} times"
        )
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(t)) and np.all(m > 0) and np.all(t > 0)):
        raise ConfigurationError("sizes and times must be positive and finite")
    if np.any(n < 2) or np.any(n != np.round(n)):
        raise ConfigurationError(f"n={sorted(set(n.tolist()))} must be whole numbers of processes >= 2")
    latency_col = 2.0 * (n - 1.0)
    bandwidth_col = 2.0 * (n - 1.0) / n * m
    w = 1.0 / t
    a = np.column_stack([latency_col * w, bandwidth_col * w])
    alpha, inv_beta = np.linalg.lstsq(a, t * w, rcond=None)[0]
    if alpha < 0:
        alpha = 0.0
        inv_beta = float(np.dot(bandwidth_col * w, t * w) / np.dot(bandwidth_col * w, bandwidth_col * w))
    if not inv_beta > 0:
        raise ConfigurationError("the measured times do not grow with the message size: no bandwidth to fit")
    predicted = alpha * latency_col + inv_beta * bandwidth_col
    residual = np.log(t) - np.log(predicted)
    spread = np.log(t) - np.log(t).mean()
    r2 = 1.0 - float(residual @ residual) / float(spread @ spread) if spread.any() else float("nan")
    return AlphaBetaFit(float(alpha), float(1.0 / inv_beta), r2, int(m.size), tuple(sorted({int(x) for x in n})))


@dataclass(frozen=True)
class AllReduceMeasurement:
    """All-reduce times (s): for every N and size, one time per repetition, each the slowest rank's.

    times(n) reduces the repetitions with the measurement's `statistic`: 'min' (default) or
    'median'. On a shared CPU the operating system can only ever delay a run (another process
    scheduled, a thread woken late), never speed it up, so the fastest repetition is the
    least-disturbed estimate of what the algorithm itself costs; the median shows what a
    typical run costs on this machine.
    """

    world_sizes: tuple
    sizes_bytes: tuple
    samples: dict  # N -> tuple of np.ndarray (one array of repetitions per size)
    cores: float  # usable CPU cores (usable_cores()) when measured
    statistic: str = "min"

    def times(self, n, statistic=None) -> np.ndarray:
        """One time per size for group size n: min or median over the repetitions."""
        how = self.statistic if statistic is None else statistic
        if how not in ("min", "median"):
            raise ConfigurationError(f"statistic={how!r}; valid: min, median")
        reduce = np.min if how == "min" else np.median
        return np.array([reduce(x) for x in self.samples[n]])

    def spread(self, n) -> np.ndarray:
        """median / min per size: how much slower a typical repetition is than the fastest."""
        return self.times(n, "median") / self.times(n, "min")

    def fit(self, world_sizes=(2,), statistic=None) -> AlphaBetaFit:
        """alpha and beta fitted on the given group sizes (default: N = 2 only)."""
        sizes = np.concatenate([self.sizes_bytes for _ in world_sizes])
        times = np.concatenate([self.times(n, statistic) for n in world_sizes])
        ns = np.concatenate([np.full(len(self.sizes_bytes), n) for n in world_sizes])
        return fit_alpha_beta(sizes, times, ns)

    def table(self, fit: AlphaBetaFit, statistic=None) -> str:
        """Measured time against the fit's ring prediction, per N and size."""
        lines = [f"{'N':>2} {'size':>10} {'measured':>11} {'ring model':>11} {'measured/model':>15}"]
        for n in self.world_sizes:
            for size, t in zip(self.sizes_bytes, self.times(n, statistic)):
                p = fit.predict(size, n)
                lines.append(
                    f"{n:>2} {format_bytes(size):>10} {format_seconds(t):>11} {format_seconds(p):>11} {t / p:>15.2f}"
                )
        return "\n".join(lines)


def _cgroup_cpu_limit(root=Path("/sys/fs/cgroup"), membership=Path("/proc/self/cgroup")) -> float | None:
    """CPUs the cgroup quota allows (quota / period, the smallest from the process's cgroup up), or None.

    cgroup v2: cpu.max ("QUOTA PERIOD", or "max PERIOD" for none); v1: cpu.cfs_quota_us and
    cpu.cfs_period_us (quota -1: none). Linux docs, admin-guide/cgroup-v2.rst and
    scheduler/sched-bwc.rst. A container sees its own cgroup as the root, so the root is read too.
    """
    root, limits = Path(root), []
    try:
        lines = Path(membership).read_text().splitlines()
    except OSError:
        lines = []
    dirs = []  # (directory, version)
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.strip().lstrip("/")
        if controllers == "":
            dirs.append((root / rel, 2))
        elif "cpu" in controllers.split(","):
            dirs.append((root / controllers / rel, 1))
    dirs += [(root, 2), (root / "cpu", 1), (root / "cpu,cpuacct", 1)]
    for start, version in dirs:
        d = start
        while True:
            try:
                if version == 2:
                    quota, period = (d / "cpu.max").read_text().split()[:2]
                else:
                    quota = (d / "cpu.cfs_quota_us").read_text().strip()
                    period = (d / "cpu.cfs_period_us").read_text().strip()
                if quota not in ("max", "-1") and int(quota) > 0 and int(period) > 0:
                    limits.append(int(quota) / int(period))
            except (OSError, ValueError):
                pass
            if d == root or root not in d.parents:
                break
            d = d.parent
    return min(limits) if limits else None


def usable_cores() -> float:
    """CPU cores this process may use: its CPU affinity, capped by a cgroup CPU quota (may be fractional)."""
    try:
        cores = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS, Windows)
        cores = float(os.cpu_count() or 1)
    limit = _cgroup_cpu_limit()
    return min(cores, limit) if limit is not None else cores


def _ipv4_of(name: str) -> str | None:
    """IPv4 address of network interface `name` (Linux ioctl SIOCGIFADDR), or None."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            ifreq = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
        except OSError:
            return None
    return socket.inet_ntoa(ifreq[20:24])


def _loopback_interface() -> str:
    """Name of the network interface carrying 127.0.0.1, for GLOO_SOCKET_IFNAME ('lo' on Linux, 'lo0' on macOS)."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    if sys.platform.startswith("linux"):
        for name in names:
            if _ipv4_of(name) == "127.0.0.1":
                return name
    else:  # BSD and macOS name the loopback interface lo0
        for name in ("lo0", "lo"):
            if name in names:
                return name
    raise DistlabError(
        f"found no network interface carrying 127.0.0.1 (interfaces: {', '.join(names) or 'none'}); "
        "the all-reduce measurement only talks to 127.0.0.1"
    )


def loopback_interface() -> str:
    """The name of the network interface that carries 127.0.0.1 (gloo is told to use it: GLOO_SOCKET_IFNAME)."""
    return _loopback_interface()


def _tail(path: Path, lines: int = 6, chars: int = 1500) -> str:
    """The last lines a worker printed, without Python traceback frames (the error line stays)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = []
    for line in text.splitlines():
        line = re.sub(r"^\[rank\d+\]:\s?", "", line).rstrip()  # torch prefixes a rank's stderr lines
        if line and not line.startswith((" ", "Traceback (most recent call last)")):
            kept.append(line)
    return "\n".join(kept[-lines:])[-chars:]


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


def measure_all_reduce(
    world_sizes=(2, 3, 4), sizes_bytes=DEFAULT_SIZES, repeats=None, warmup=1, timeout=120.0, startup_timeout=120.0
) -> AllReduceMeasurement:
    """Time dist.all_reduce of float32 tensors on a gloo group of N processes on 127.0.0.1, for each N and size.

    One set of max(world_sizes) processes is forked after one torch import (distlab.verify._forked); a group of the
    first N ranks is timed for each N while the others wait at a barrier. Every timing starts
    after a barrier of its group; each repetition keeps the slowest rank's time (`repeats`
    repetitions per size, default: default_repeats(size), after `warmup` untimed ones).
    The processes meet through a torch.distributed.FileStore in a temporary directory (no
    listening socket) and gloo talks over the loopback interface only. `startup_timeout` (s)
    bounds starting them and joining the group, `timeout` (s) the measurement after that; if a
    worker fails, the others are stopped at once and its exit code and last output raised.
    """
    require_torch()
    import torch.distributed as dist

    world_sizes = tuple(sorted({int(n) for n in world_sizes}))
    if not world_sizes or world_sizes[0] < 2:
        raise ConfigurationError(f"world_sizes={world_sizes} must be process counts >= 2")
    sizes = tuple(int(s) for s in sizes_bytes)
    if any(s < 4 or s % 4 for s in sizes):
        raise ConfigurationError(f"sizes_bytes={sizes} must be whole float32 tensors (multiples of 4 bytes)")
    reps = tuple(default_repeats(s) for s in sizes) if repeats is None else tuple(int(repeats) for _ in sizes)
    if not (dist.is_available() and dist.is_gloo_available()):
        raise DistlabError("this PyTorch build has no torch.distributed gloo backend")
    world = world_sizes[-1]
    env = dict(os.environ, GLOO_SOCKET_IFNAME=_loopback_interface(), OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="distlab-allreduce-") as tmp:
        work = Path(tmp)
        base = dict(
            world=world,
            store=str(work / "store"),
            dir=str(work),
            world_sizes=list(world_sizes),
            sizes=list(sizes),
            repeats=list(reps),
            warmup=int(warmup),
            timeout=float(timeout) + float(startup_timeout),
        )
        logs = [work / f"rank{rank}.log" for rank in range(world)]  # files, not pipes: a chatty rank never blocks
        procs = []
        try:  # the ranks are forked after one torch import (distlab.verify._forked), each reported on its own
            procs = start_ranks("distlab.verify._allreduce_worker", dict(base, logs=[str(log) for log in logs]), env)
            _wait(procs, logs, work, world, float(startup_timeout), float(timeout))
        finally:
            _stop(procs)
        gathered = json.loads((work / "result.json").read_text())["times"]
    samples = {
        n: tuple(
            np.array([gathered[r][str(n)][i] for r in range(n)], dtype=float).max(axis=0) for i in range(len(sizes))
        )
        for n in world_sizes
    }
    return AllReduceMeasurement(world_sizes, sizes, samples, usable_cores())


def _wait(
    procs, logs, work: Path, world: int, startup_timeout: float, timeout: float, what: str = "all-reduce"
) -> None:
    """Poll the workers until all exit 0; raise DistlabError on the first failure or when out of time.
    `what` names the measurement in the messages ('all-reduce', 'all-to-all')."""
    deadline, started = time.monotonic() + startup_timeout, False
    while True:
        codes = [p.poll() for p in procs]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            _stop(procs)
            parts = []
            for rank, code in failed:
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                out = _tail(logs[rank])
                parts.append(f"{what} worker rank {rank} {how}" + (f":\n{out}" if out else " (no output)"))
            raise DistlabError("\n".join(parts))
        if all(code == 0 for code in codes):
            if not (work / "result.json").is_file():
                raise DistlabError(f"the {what} workers exited without writing their timings")
            return
        if not started and all((work / f"ready{rank}").exists() for rank in range(world)):
            started, deadline = True, time.monotonic() + timeout
        if time.monotonic() > deadline:
            _stop(procs)
            if not started:
                waiting = [str(r) for r in range(world) if not (work / f"ready{r}").exists()]
                raise DistlabError(
                    f"the {what} workers did not start within {startup_timeout:g} s "
                    f"({'rank' if len(waiting) == 1 else 'ranks'} {', '.join(waiting)} never joined the group; this machine may be "
                    "overloaded: try startup_timeout=...)"
                )
            raise DistlabError(
                f"the {what} measurement did not finish within {timeout:g} s after start-up "
                "(try fewer or smaller sizes, or timeout=...)"
            )
        time.sleep(0.02)
