"""DDP, FSDP2 and HSDP in real PyTorch on this CPU (gloo, processes on 127.0.0.1), next to distlab.fsdp (lesson 11).

``measure_sharding`` trains the same small stack of linear layers three ways on `world` processes and reads,
per rank, the parameter and Adam-state bytes it holds and the collectives FSDP2 issues in one step. distlab
predicts them: DDP keeps everything (P parameters of 4 bytes, 8 bytes of Adam moments each); FSDP2 shards
over all `world` ranks, HSDP over the `per_node` ranks of a "node" (a 2-D DeviceMesh, replicate x shard);
one step runs distlab.fsdp.collectives_per_microbatch's all-gathers, reduce-scatters and (HSDP) all-reduces,
each of one layer's parameters. The three runs see the same global batch, so their losses agree to float
rounding. Uses private torch API nowhere; checked with torch 2.13.0 (CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigurationError, DistlabError
from ..fsdp import collectives_per_microbatch
from ._torch import require_torch
from .allreduce import loopback_interface

#: The three ways measure_sharding trains.
MODES = ("ddp", "fsdp", "hsdp")


@dataclass(frozen=True)
class ShardingRun:
    """One mode's measurement: per rank bytes, rank 0's collectives in the first step, the losses."""

    mode: str
    param_bytes: tuple
    optimizer_bytes: tuple
    collectives: tuple  # (op, buffer bytes, group size) in issue order, rank 0, first step
    losses: tuple

    def count(self, op: str) -> int:
        return sum(1 for c in self.collectives if c[0] == op)

    def kinds(self) -> list[str]:
        """The collectives in issue order, an HSDP all-reduce folded into the reduce-scatter before it:
        'all-gather' or 'reduce' (distlab.fsdp.FsdpTimeline.comm_order's words)."""
        return [
            ("all-gather" if op == "all-gather" else "reduce") for op, _, _ in self.collectives if op != "all-reduce"
        ]


@dataclass(frozen=True)
class ShardingMeasurement:
    """measure_sharding's result: each mode's run and distlab's prediction of what it holds and sends."""

    world: int
    per_node: int
    layers: int
    width: int
    runs: dict = field(default_factory=dict)

    @property
    def params(self) -> int:
        return self.layers * (self.width * self.width + self.width)

    def predicted_param_bytes(self, mode: str) -> float:
        """4 P / shard: everything (DDP), / world (FSDP2), / per_node (HSDP)."""
        return 4.0 * self.params / {"ddp": 1, "fsdp": self.world, "hsdp": self.per_node}[mode]

    def predicted_order(self) -> list[str]:
        """The collectives of one step in issue order by distlab.fsdp's schedule (prefetch 1, resharding)."""
        from ..fsdp import fsdp_timeline

        return [kind for kind, _ in fsdp_timeline(1.0, 2.0, 0.5, 0.5, self.layers).comm_order()]

    def predicted_collectives(self, mode: str) -> dict:
        replicas = self.world // self.per_node if mode == "hsdp" else 1
        return collectives_per_microbatch(self.layers, True, replicas)

    def summary(self) -> str:
        lines = [
            f"{self.layers} linear layers of {self.width} x {self.width} (+ bias): P = {self.params:,} "
            f"parameters, {self.world} gloo processes ({self.per_node} per 'node' for HSDP)"
        ]
        for mode, run in self.runs.items():
            got = run.param_bytes[0]
            want = self.predicted_param_bytes(mode)
            text = f"{mode:>4}: rank 0 holds {got:,} B of parameters (distlab: {want:,.0f})"
            if mode != "ddp":
                counts = {op: run.count(op) for op in ("all-gather", "reduce-scatter", "all-reduce")}
                # each on a line of its own, so that no line is wider than a notebook's output
                text += f";\n      one step ran {counts}\n      (distlab: {self.predicted_collectives(mode)})"
            text += f";\n      losses {', '.join(f'{x:.6f}' for x in run.losses)}"
            lines.append(text)
        return "\n".join(lines)


def measure_sharding(modes=MODES, world=4, per_node=2, layers=3, width=16, steps=2, timeout=300.0):
    """Train with DDP, FSDP2 (fully_shard) and HSDP on `world` gloo processes; see the module notes. Lesson 11 §2."""
    require_torch()
    import torch.distributed as dist

    modes = tuple(modes)
    if not modes or any(m not in MODES for m in modes):
        raise ConfigurationError(f"modes={modes!r}; valid: any of {', '.join(MODES)}")
    for name, value, low in (
        ("world", world, 2),
        ("per_node", per_node, 1),
        ("layers", layers, 1),
        ("width", width, 1),
        ("steps", steps, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 64:
            raise ConfigurationError(f"{name}={value!r} must be a whole number in {low}..64")
    if world % per_node or per_node == world:
        raise ConfigurationError(
            f"per_node={per_node} must divide world={world} and be smaller (HSDP needs 2+ 'nodes')"
        )
    if width % world:
        raise ConfigurationError(f"width={width} must be a multiple of world={world} (even dim-0 shards, no padding)")
    if not (dist.is_available() and dist.is_gloo_available()):
        raise DistlabError("this PyTorch build has no torch.distributed gloo backend")
    env = dict(os.environ, GLOO_SOCKET_IFNAME=loopback_interface(), OMP_NUM_THREADS="1")
    result = ShardingMeasurement(world, per_node, layers, width)
    with tempfile.TemporaryDirectory(prefix="distlab-sharding-") as tmp:
        config = dict(
            world=world,
            per_node=per_node,
            modes=list(modes),
            layers=layers,
            width=width,
            steps=steps,
            batch=4 * world,
            store=str(Path(tmp) / "store"),
            dir=tmp,
            timeout=float(timeout),
        )
        try:  # one set of `world` processes runs every mode in turn (each start imports torch: seconds)
            done = subprocess.run(
                [sys.executable, "-m", "distlab.verify._sharding_worker", json.dumps(config)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                env=env,
                timeout=float(timeout),
            )
        except subprocess.TimeoutExpired as exc:
            raise DistlabError(f"the {'/'.join(modes)} runs did not finish within {timeout:g} s") from exc
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-6:])
            raise DistlabError(f"the {'/'.join(modes)} runs failed (exit code {done.returncode}):\n{tail}")
        for mode in modes:
            ranks = [json.loads((Path(tmp) / f"{mode}-rank{r}.json").read_text()) for r in range(world)]
            result.runs[mode] = ShardingRun(
                mode,
                tuple(r["param_bytes"] for r in ranks),
                tuple(r["optimizer_bytes"] for r in ranks),
                tuple(tuple(c) for c in ranks[0]["collectives"]),
                tuple(ranks[0]["losses"]),
            )
    return result
