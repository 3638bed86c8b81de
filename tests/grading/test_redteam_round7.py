"""Red team round 7's successful attacks fixed by the grader's operating-system limits and its problem list
(default/02, modes/03, 08, 12), each kept as a test that fails on the code they broke."""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import subprocess
import sys
import time

import nbformat
import nbformat.v4 as v4
import pytest

from distlab.grading import cgroups, grade
from distlab.grading.class_results import problems_cell
from distlab.grading.kernel import MAX_CELL_PROBLEMS, MAX_PROBLEMS, bwrap_available
from distlab.grading.sandbox import limits_prefix
from test_redteam_default_round2 import run_bwrap as run_bwrap_with
from test_redteam_round2_os import run_bwrap

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the grader must be root (it makes the kernel's cgroups)")


def _v1_memory_parent() -> str | None:
    """This process's folder in the cgroup v1 memory hierarchy (None: there is none)."""
    own = cgroups._own_cgroup("memory")
    folder = None if own is None else os.path.join(cgroups.CGROUP_ROOT, "memory", own.lstrip("/"))
    return folder if folder is not None and os.path.exists(os.path.join(folder, "cgroup.procs")) else None


# --- default/02: TCP socket buffers outside the memory cgroup --------------------------------------------------------

#: the attack's cells.py, aimed at 200 MiB: loopback TCP connections written to (non-blocking, until EAGAIN) and never
#: read; 80 connections at most (160 descriptors: the kernel may hold 256). The message says how much was queued
TCP_FLOOD = """
import socket
L = socket.socket(); L.bind(("127.0.0.1", 0)); L.listen(128); port = L.getsockname()[1]
conns, total, TARGET, chunk = [], 0, 200 * 2**20, b"x" * 65536
while total < TARGET and len(conns) < 80:
    c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    c.connect(("127.0.0.1", port)); s, _ = L.accept(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    c.setblocking(False)
    while total < TARGET:
        try:
            total += c.send(chunk)
        except BlockingIOError:
            break
    conns.append((c, s))
raise RuntimeError(f"queued {total} bytes in {len(conns)} connections")
"""


@needs_root
@needs_bwrap
@pytest.mark.skipif(
    _v1_memory_parent() is None
    or not os.path.exists(os.path.join(str(_v1_memory_parent()), "memory.kmem.tcp.usage_in_bytes")),
    reason="no cgroup v1 memory hierarchy with memory.kmem.tcp.* (cgroup v2 counts socket buffers in memory.max)",
)
def test_the_kernel_queues_no_tcp_buffers_and_its_cgroup_caps_them_anyway(tmp_path):
    # default/02: with cgroup v1 the kernel queued 400 MiB in loopback TCP buffers while its memory cgroup counted
    # 66 MiB (v1 charges them to memory.kmem.tcp.* only once its limit is set). The kernel's cgroup then set it
    # (KERNEL_TCP_BUFFER_BYTES, 64 MiB: 209,718,383 bytes queued here without it, 63,148,703 with it), and red team
    # round 9 default/01 went past the cap with connections no one accepts (240 MiB, charged to no cgroup). Now the
    # kernel opens no inet socket at all (seccomp.SOCKET_FAMILIES: AF_UNIX only), so nothing is queued; the cap stays
    # as a second layer, checked on the cgroup the grader makes
    problems: list[str] = []
    run_bwrap_with([TCP_FLOOD], tmp_path, problems, memory_limit=4 * 2**30, audit_hook=False)
    assert any("Address family not supported" in p for p in problems), problems
    assert not any(re.search(r"queued \d+ bytes", p) for p in problems), problems
    made = cgroups.KernelCgroups(cgroups.kernel_cgroup_name(), 2**30, None)
    try:
        memory = next(f for f in made.folders if "/memory/" in f)
        with open(os.path.join(memory, "memory.kmem.tcp.limit_in_bytes")) as f:
            assert int(f.read()) == cgroups.KERNEL_TCP_BUFFER_BYTES
    finally:
        made.remove()


# --- modes/08: the sweep judged a cgroup by a pid of another pid namespace -------------------------------------------


def _named_for_pid_one() -> str:
    """A kernel cgroup name as a grader that is process 1 of its pid namespace makes it (kernel_cgroup_name there):
    pid 1 with a start time our process 1 does not have."""
    ours = cgroups._start_time(1)
    return f"{cgroups.PREFIX}1-{int(ours or 0) + 12345}-{secrets.token_hex(4)}"


def test_a_fresh_empty_kernel_cgroup_is_never_swept_whatever_its_name(tmp_path):
    # modes/08: a grader in another pid namespace names its cgroups distlab-kernel-1-...; looked up in this grader's
    # /proc, pid 1 is another process, so the old sweep took the cgroup as abandoned and removed it while empty
    # (between its mkdir and the starter joining it): every kernel of that grader failed to start. Now only a cgroup
    # older than MIN_SWEEP_AGE_S may go (plain folders here: rmdir removes only an empty one, as cgroupfs does)
    fresh, old = tmp_path / _named_for_pid_one(), tmp_path / _named_for_pid_one()
    fresh.mkdir()
    old.mkdir()
    os.utime(old, (time.time() - cgroups.MIN_SWEEP_AGE_S - 60,) * 2)
    assert cgroups.sweep_hierarchy(str(tmp_path)) == 1
    assert fresh.exists() and not old.exists()


@needs_root
@pytest.mark.skipif(_v1_memory_parent() is None, reason="no cgroup v1 memory hierarchy to make a kernel cgroup in")
def test_a_live_graders_fresh_kernel_cgroup_survives_a_sweep_and_an_old_empty_one_does_not():
    # the same on real cgroups, made as the grader makes them (KernelCgroups, under this process's own cgroup)
    fresh = cgroups.KernelCgroups(_named_for_pid_one(), 2**30, None)
    old = cgroups.KernelCgroups(_named_for_pid_one(), 2**30, None)
    try:
        parent = str(_v1_memory_parent())  # the memory cgroup first (then pids, blkio: round 11)
        assert fresh.folders[0].startswith(parent) and old.folders[0].startswith(parent)
        os.utime(old.folders[0], (time.time() - cgroups.MIN_SWEEP_AGE_S - 60,) * 2)
        cgroups.sweep_hierarchy(str(_v1_memory_parent()))
        assert os.path.isdir(fresh.folders[0]) and not os.path.exists(old.folders[0])
    finally:
        fresh.remove()
        old.remove()


# --- modes/03: 52 raising cells pushed the grader's own notes out of every output ------------------------------------


def test_the_graders_own_note_survives_a_flood_of_raising_cells(tmp_path):
    # modes/03: the kernel raised in 52 cells, then exited; the run kept the first 49 problems and "... and 4 more",
    # so "the kernel stopped ... in code cell 53" reached no output. Now the cells' own problems are capped
    # (MAX_CELL_PROBLEMS) and counted, and the grader's notes are always kept: 60 raised, 36 shown, 24 counted
    cells = [f"raise ValueError('flood {n}')" for n in range(60)] + ["import os\nos._exit(3)"]
    nb = v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells])
    nb.metadata["distlab"] = {"lesson": "memory_wall"}
    path = tmp_path / "01_memory_wall.ipynb"
    nbformat.write(nb, path)
    result = grade.grade_notebook(path, timeout=300, cell_timeout=30)
    stopped = [p for p in result.problems if p.startswith("the kernel stopped")]
    assert len(stopped) == 1 and "code cell 61" in stopped[0], result.problems
    assert len(result.problems) <= MAX_PROBLEMS
    assert sum("raised ValueError: flood" in p for p in result.problems) == MAX_CELL_PROBLEMS
    assert f"... and {60 - MAX_CELL_PROBLEMS} more problems of code cells (not shown)" in result.problems
    assert "the kernel stopped" in problems_cell(result.problems)  # results.csv's cell
    assert stopped[0] in json.loads(json.dumps(result.to_dict()))["problems"]  # results.json and the journal


def test_the_first_problem_of_each_kind_of_cell_is_kept_past_the_cap():
    # the rest of modes/03: a cell past its time limit or whose message was dropped after MAX_CELL_PROBLEMS raising
    # cells is still said once (the first of its kind); later ones of a kind are counted
    from distlab.grading.kernel import _Problems

    problems: list[str] = []
    noted = _Problems(problems)
    for n in range(MAX_CELL_PROBLEMS + 5):
        noted.cell("raised", f"raised {n}")
    noted.cell("time", "time 1")
    noted.cell("time", "time 2")
    noted.cell("dropped", "dropped 1")
    noted.note("the answers could not be read")
    noted.close()
    assert problems[:MAX_CELL_PROBLEMS] == [f"raised {n}" for n in range(MAX_CELL_PROBLEMS)]
    assert problems[MAX_CELL_PROBLEMS:] == [
        "time 1",
        "dropped 1",
        "the answers could not be read",
        "... and 6 more problems of code cells (not shown)",  # 5 raised + time 2
    ]


# --- modes/12: RLIMIT_CORE soft 0, hard unlimited ----------------------------------------------------------------------

#: what the kernel sees of its rlimits: RLIMIT_CORE, whether raising it to 1 MiB (soft and hard) worked, and every
#: rlimit whose hard limit is above its soft one
RLIMITS = """
import resource
try:
    resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))
    raised = True
except (ValueError, OSError):
    raised = False
loose = sorted(n for n in dir(resource) if n.startswith("RLIMIT_") and len(set(resource.getrlimit(getattr(resource, n)))) > 1)
answer_x = [list(resource.getrlimit(resource.RLIMIT_CORE)), raised, loose]
"""
core_unlimited = pytest.mark.skipif(
    resource.getrlimit(resource.RLIMIT_CORE)[1] == 0, reason="the grader's own hard core limit is 0 already"
)


@needs_bwrap
@core_unlimited
def test_the_bubblewrap_kernel_cannot_raise_its_core_limit_nor_any_other(tmp_path):
    # modes/12: the kernel raised RLIMIT_CORE (hard unlimited) and dumped 64 MiB of core; where core_pattern pipes to
    # a handler the host runs it as root outside every limit. Now every hard limit is the soft one (HARD_IS_SOFT)
    problems: list[str] = []
    snapshot = run_bwrap([RLIMITS], tmp_path, problems)
    assert snapshot == {"answer_x": [[0, 0], False, []]}, (snapshot, problems)


@core_unlimited
def test_the_container_kernel_cannot_raise_its_core_limit_nor_any_other():
    # the same in container mode: its kernel starts under limits_prefix (then setpriv and the seccomp filter)
    code = RLIMITS + "\nimport json; print(json.dumps(answer_x))"
    done = subprocess.run(
        [*limits_prefix(2**30, 64, 2**20, 60), sys.executable, "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[0, 0], False, []]
