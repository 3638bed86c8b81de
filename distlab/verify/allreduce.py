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
import socket
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from ..collectives import ring_all_reduce_time
from ..errors import ConfigurationError, DistlabError
from ..units import format_bytes, format_rate, format_seconds
from ._torch import require_torch

#: Message sizes of the default sweep: 1 KiB to 64 MiB, a factor 4 apart.
DEFAULT_SIZES = tuple(4 ** k * 1024 for k in range(9))


def default_repeats(size_bytes: int) -> int:
    """Timed repetitions per size: more for small messages (cheap, noisy), fewer for large ones."""
    return 15 if size_bytes <= 64 * 1024 else 7 if size_bytes <= 1024 * 1024 else 5 if size_bytes <= 4 << 20 else 3


@dataclass(frozen=True)
class AlphaBetaFit:
    """alpha (s per step) and beta (bytes/s per direction) of the ring model, fitted to measured times."""

    alpha_s: float
    beta_bytes_per_s: float
    r2_log: float            # coefficient of determination of log(time), on the fitted points
    points: int
    world_sizes: tuple

    def predict(self, size_bytes, n):
        """Ring all-reduce time (s) of distlab.collectives.ring_all_reduce_time with these alpha and beta."""
        return ring_all_reduce_time(size_bytes, n, self.beta_bytes_per_s, self.alpha_s)

    def predict_shared_cpu(self, size_bytes, n, cores):
        """The ring prediction when n processes share `cores` CPU cores (fit made with one core each).

        Every byte is copied and summed by a CPU, so with n > cores each process gets cores/n of
        a core: beta becomes beta * cores / n. Same formula, ring_all_reduce_time.
        """
        share = min(1.0, cores / n)
        return ring_all_reduce_time(size_bytes, n, self.beta_bytes_per_s * share, self.alpha_s)

    def summary(self) -> str:
        on = ", ".join(f"N = {n}" for n in self.world_sizes)
        return (f"alpha = {format_seconds(self.alpha_s)} per step, beta = {format_rate(self.beta_bytes_per_s)} "
                f"per direction (fitted on {on}, {self.points} points; R^2 of log time = {self.r2_log:.3f})")


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
        raise ConfigurationError(f"need at least 2 (size, time) pairs of equal length; got {m.size} sizes, {t.size} times")
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
    samples: dict          # N -> tuple of np.ndarray (one array of repetitions per size)
    cpu_count: int
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
                lines.append(f"{n:>2} {format_bytes(size):>10} {format_seconds(t):>11} {format_seconds(p):>11} "
                             f"{t / p:>15.2f}")
        return "\n".join(lines)


def _loopback_interface() -> str:
    names = [name for _, name in socket.if_nameindex()]
    if "lo" not in names:
        raise DistlabError(f"no loopback network interface 'lo' (found: {', '.join(names)}); "
                           "the all-reduce measurement only talks to 127.0.0.1")
    return "lo"


def measure_all_reduce(world_sizes=(2, 3, 4), sizes_bytes=DEFAULT_SIZES, repeats=None, warmup=1,
                       timeout=120.0) -> AllReduceMeasurement:
    """Time dist.all_reduce of float32 tensors on a gloo group of N processes on 127.0.0.1, for each N and size.

    One set of max(world_sizes) processes is started (each imports torch once); a group of the
    first N ranks is timed for each N while the others wait at a barrier. Every timing starts
    after a barrier of its group; each repetition keeps the slowest rank's time (`repeats`
    repetitions per size, default: default_repeats(size), after `warmup` untimed ones).
    """
    torch = require_torch()
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
    # The parent hosts the rendezvous store on a port the OS picks (port 0): no race for a free port.
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False)
    env = dict(os.environ, GLOO_SOCKET_IFNAME=_loopback_interface(), MASTER_ADDR="127.0.0.1",
               OMP_NUM_THREADS="1")
    base = dict(world=world, port=store.port, world_sizes=list(world_sizes), sizes=list(sizes),
                repeats=list(reps), warmup=int(warmup), timeout=float(timeout))
    procs = []
    try:
        for rank in range(world):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distlab.verify._allreduce_worker", json.dumps(dict(base, rank=rank))],
                stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                text=True))
        out, err0 = procs[0].communicate(timeout=timeout)
        errors = [err0] + [p.communicate(timeout=timeout)[1] for p in procs[1:]]
    except subprocess.TimeoutExpired as exc:
        raise DistlabError(f"the all-reduce measurement did not finish within {timeout:g} s") from exc
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs) or not out.strip():
        tail = "\n".join(e.strip()[-800:] for e in errors if e and e.strip())
        raise DistlabError(f"an all-reduce worker failed:\n{tail}")
    gathered = json.loads(out.strip().splitlines()[-1])["times"]
    samples = {n: tuple(np.array([gathered[r][str(n)][i] for r in range(n)], dtype=float).max(axis=0)
                        for i in range(len(sizes)))
               for n in world_sizes}
    return AllReduceMeasurement(world_sizes, sizes, samples, os.cpu_count() or 1)
