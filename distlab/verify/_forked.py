"""Ranks forked after one torch import: python -m distlab.verify._forked MODULE CONFIG_JSON (lessons 9 and 10).

This process imports torch and MODULE, then forks config["world"] ranks, each running MODULE.main(config with its
"rank") with its stdout and stderr in config["logs"][rank], and writes each rank's exit status to
<config["dir"]>/exit<rank> as the rank ends (as subprocess.Popen's returncode: the exit code, or minus the signal
that killed it). Importing torch takes about 1.3 s of CPU here: once, not once per rank, as a CPU DataLoader forks its
workers (measure_sharding does the same, lesson 11). This process runs nothing else before the forks: no torch op,
no thread of its own. start_ranks() runs it and gives the caller one Popen-like object per rank, so a failing rank is
still reported by its own exit status and output (distlab.verify.allreduce._wait).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

__all__ = ["start_ranks"]


def _write_exit(folder: Path, rank: int, code: int) -> None:
    partial = folder / f"exit{rank}.partial"
    partial.write_text(str(code))
    partial.replace(folder / f"exit{rank}")  # appears whole or not at all


def _run_rank(module, config: dict, rank: int) -> None:
    """In the forked child: the rank's output to its log, MODULE.main, then exit (never returns)."""
    code = 1
    try:
        log = os.open(config["logs"][rank], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        module.main(dict(config, rank=rank))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()  # what python -m MODULE would print: _wait reports its last lines
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(module_name: str, config: dict) -> int:
    """Import torch and `module_name`, fork the ranks, write each one's exit status as it ends."""
    folder, world = Path(config["dir"]), int(config["world"])
    try:
        import torch.distributed  # noqa: F401 - imported here, once, for every rank

        module = importlib.import_module(module_name)
    except BaseException:  # every rank fails with the reason (a broken install)
        for rank in range(world):
            Path(config["logs"][rank]).write_text(traceback.format_exc())
            _write_exit(folder, rank, 1)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    ranks = {}
    for rank in range(world):
        pid = os.fork()
        if pid == 0:
            _run_rank(module, config, rank)
        ranks[pid] = rank
    while ranks:
        pid, status = os.wait()
        if pid in ranks:
            _write_exit(folder, ranks.pop(pid), os.waitstatus_to_exitcode(status))
    return 0


class _Rank:
    """One forked rank as the caller sees it: poll() its exit status (None while it runs), kill() (every rank and
    the launcher: one process group), wait()."""

    def __init__(self, launcher: subprocess.Popen, exit_file: Path):
        self.launcher, self.exit_file = launcher, exit_file
        self.returncode: int | None = None

    def _read(self) -> int | None:
        try:
            return int(self.exit_file.read_text())
        except (OSError, ValueError):
            return None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._read()
        if self.returncode is None and self.launcher.poll() is not None:
            # the launcher is gone: the rank's status is written, or the launcher was killed with it
            self.returncode = self._read()
            if self.returncode is None:
                self.returncode = self.launcher.returncode or -signal.SIGKILL
        return self.returncode

    def kill(self) -> None:
        try:
            os.killpg(self.launcher.pid, signal.SIGKILL)
        except OSError:  # every process of the group has ended
            pass

    def wait(self) -> int | None:
        self.launcher.wait()
        return self.poll()


def start_ranks(module_name: str, config: dict, env: dict) -> list[_Rank]:
    """Start the launcher for `module_name` (its main(config) per rank; config: "world", "dir", "logs" and what the
    module reads) in a process group of its own; one Popen-like object per rank."""
    folder = Path(config["dir"])
    with open(folder / "launcher.log", "wb") as log:
        launcher = subprocess.Popen(
            [sys.executable, "-m", __name__, module_name, json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # the ranks are forked into its group: kill() ends them all
        )
    return [_Rank(launcher, folder / f"exit{rank}") for rank in range(int(config["world"]))]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], json.loads(sys.argv[2])))
