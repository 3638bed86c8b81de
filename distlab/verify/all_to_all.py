"""An MoE dispatch all-to-all on a real torch.distributed process group (gloo, processes on 127.0.0.1).

Every rank routes the same seeded tokens with distlab.moe.simulate_routing, so each knows how many token
copies it sends to, and receives from, every other rank. It then runs dist.all_to_all_single with those
split sizes (float32 rows of `hidden` elements) and checks that each received row came from the rank that
the routing says. The bytes torch was asked to move (split sizes x row bytes) are compared with the
simulation's byte matrix, and the times with the pairwise-exchange model of distlab.collectives,
(N-1) alpha + (N-1)/N x M / beta, fitted here (M: a rank's send buffer). Lesson 10 §2.

Needs PyTorch; import distlab never imports it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import moe
from .._arguments import whole_number
from ..errors import ConfigurationError, DistlabError
from ..units import format_bytes, format_rate, format_seconds
from ._forked import start_ranks
from ._torch import require_torch
from .allreduce import _loopback_interface, _stop, _wait, usable_cores

__all__ = ["AllToAllMeasurement", "measure_all_to_all"]


@dataclass(frozen=True)
class AllToAllMeasurement:
    """What torch moved and how long it took, next to distlab's routing simulation.

    bytes_torch[h][i, j]: bytes rank i handed all_to_all_single for rank j with rows of h float32 values;
    trace: the routing (hidden 1, 4-byte elements), whose bytes_matrix x h is distlab's prediction;
    received_ok: every rank received exactly the rows the routing sends it, from the right ranks;
    times[h]: per repetition, the slowest rank's time.
    """

    world: int
    hiddens: tuple
    trace: moe.RoutingTrace
    bytes_torch: dict
    received_ok: bool
    times: dict
    cores: float

    def predicted_bytes(self, hidden) -> np.ndarray:
        """distlab's byte matrix for rows of `hidden` float32 values."""
        return self.trace.bytes_matrix * hidden

    def bytes_match(self) -> bool:
        """True when torch's split sizes equal distlab's byte matrix for every hidden size."""
        return all(np.array_equal(self.bytes_torch[h], self.predicted_bytes(h)) for h in self.hiddens)

    def send_buffer_bytes(self, hidden) -> float:
        """The busiest rank's send buffer M (bytes), the pairwise model's message size."""
        return float(self.bytes_torch[hidden].sum(axis=1).max())

    def fit(self) -> tuple[float, float]:
        """alpha (s) and beta (B/s) of (N-1) alpha + (N-1)/N M / beta, least squares on the fastest repetitions
        (relative residuals); alpha clamped at 0."""
        n = self.world
        m = np.array([self.send_buffer_bytes(h) for h in self.hiddens])
        t = np.array([min(self.times[h]) for h in self.hiddens])
        w = 1.0 / t
        a = np.column_stack([np.full_like(m, n - 1.0) * w, (n - 1.0) / n * m * w])
        alpha, inv_beta = np.linalg.lstsq(a, t * w, rcond=None)[0]
        if alpha < 0:
            alpha = 0.0
            col = (n - 1.0) / n * m * w
            inv_beta = float(col @ (t * w) / (col @ col))
        if not inv_beta > 0:
            raise DistlabError("the measured all-to-all times do not grow with the message size: no bandwidth")
        return float(alpha), float(1.0 / inv_beta)

    def table(self) -> str:
        alpha, beta = self.fit()
        n = self.world
        lines = [
            f"fit: alpha = {format_seconds(alpha)} per step, beta = {format_rate(beta)} per direction "
            f"({n} processes sharing {self.cores:g} cores)",
            f"{'hidden':>7} {'send buffer':>12} {'measured':>10} {'model':>10}",
        ]
        for h in self.hiddens:
            m = self.send_buffer_bytes(h)
            model = (n - 1) * alpha + (n - 1) / n * m / beta
            lines.append(
                f"{h:>7} {format_bytes(m):>12} {format_seconds(min(self.times[h])):>10} {format_seconds(model):>10}"
            )
        return "\n".join(lines)


def measure_all_to_all(
    world=4,
    tokens_per_rank=256,
    experts_per_rank=2,
    top_k=2,
    hiddens=(16, 64, 256, 1024, 4096),
    skew=0.0,
    seed=0,
    repeats=5,
    warmup=1,
    timeout=120.0,
    startup_timeout=120.0,
) -> AllToAllMeasurement:
    """Run an MoE dispatch as dist.all_to_all_single on `world` gloo processes and count its bytes (see module doc).

    Lesson 10 §2.
    """
    require_torch()
    import torch.distributed as dist

    n = whole_number(world, "world", 2, 16)
    t = whole_number(tokens_per_rank, "tokens_per_rank", 1, 4096)
    e = n * whole_number(experts_per_rank, "experts_per_rank", 1, 64)
    k = whole_number(top_k, "top_k", 1, e)
    hs = tuple(whole_number(h, "hidden", 1, 16384) for h in hiddens)
    if len(hs) < 2 or len(set(hs)) != len(hs):
        raise ConfigurationError(f"hiddens={hiddens!r} must be at least two different row widths")
    if t * k * max(hs) * 4 > 256 * 2**20:
        raise ConfigurationError("tokens_per_rank x top_k x hidden x 4 B must stay under 256 MiB per rank")
    if not (dist.is_available() and dist.is_gloo_available()):
        raise DistlabError("this PyTorch build has no torch.distributed gloo backend")
    trace = moe.simulate_routing(t, e, k, n, hidden=1, element_bytes=4, skew=skew, seed=seed)
    env = dict(os.environ, GLOO_SOCKET_IFNAME=_loopback_interface(), OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="distlab-alltoall-") as tmp:
        work = Path(tmp)
        base = dict(
            world=n,
            store=str(work / "store"),
            dir=str(work),
            tokens_per_rank=t,
            experts=e,
            top_k=k,
            hiddens=list(hs),
            skew=float(skew),
            seed=int(seed),
            repeats=whole_number(repeats, "repeats", 1, 100),
            warmup=whole_number(warmup, "warmup", 0, 10),
            timeout=float(timeout) + float(startup_timeout),
        )
        logs = [work / f"rank{rank}.log" for rank in range(n)]
        procs = []
        try:  # the ranks are forked after one torch import (distlab.verify._forked), each reported on its own
            procs = start_ranks("distlab.verify._all_to_all_worker", dict(base, logs=[str(log) for log in logs]), env)
            _wait(procs, logs, work, n, float(startup_timeout), float(timeout), what="all-to-all")
        finally:
            _stop(procs)
        ranks = json.loads((work / "result.json").read_text())["ranks"]
    bytes_torch = {h: np.array([ranks[r]["sent"][i] for r in range(n)], dtype=float) for i, h in enumerate(hs)}
    times = {h: tuple(np.array([ranks[r]["times"][i] for r in range(n)]).max(axis=0)) for i, h in enumerate(hs)}
    return AllToAllMeasurement(n, hs, trace, bytes_torch, all(r["ok"] for r in ranks), times, usable_cores())
