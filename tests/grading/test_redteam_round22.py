"""Red team round 22: fresh hostile notebooks against the default (root, bubblewrap) grader, aimed at what earlier
rounds did not try: the host's abstract unix sockets, the cgroup files bound into the sandbox, a hijack of the private
answer cell by the student's own builtins (the nonce learnt, the snapshot forged), the grader's decoding of such a
forged snapshot, and kernel memory a cgroup might not count (AF_UNIX socket buffers). No attack of the round succeeded;
each test keeps what was tried and what must hold.

01-abstract-socket: a listener in the grader's network namespace on an abstract unix name (as X11, D-Bus, containerd
and systemd use: no file, so no mount hides it) cannot be reached from the kernel (its own network namespace).
02-cgroup-files: the kernel's cgroup.procs files, bound read-write for the starter to join, cannot be written by the
kernel's user (it would move its processes out of the memory, pids and blkio limits).
03-collect-hijack: a cell that replaces builtins.compile sees the private answer cell's source (the nonce) and prints a
forged snapshot: 5,000 keys, a duplicate key, unknown kinds, numbers past int()'s limit. The grader reads the lesson's
names only, each decoded within bounds, so the forgery is worth exactly what setting the variable is.
04-forged-snapshot (no kernel): the same forgeries and odd numpy dtype strings (subarrays, structured, object, huge
strings) decoded by the grader: bounded, never an exception.
05-unix-socket-buffers: a process of a kernel's memory cgroup (64 MiB) queuing 256 MB in AF_UNIX socketpairs it never
reads: the buffers are counted (the process is stopped by the cgroup, never holds more than its limit outside it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from distlab.grading import cgroups
from distlab.grading.answers import MAX_ANSWER_VALUES, OpaqueAnswer, decode, parse_answers
from test_redteam_default_round2 import needs_bwrap, run_bwrap

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the grader must be root (a kernel user id, its cgroups)")

#: 01 and 02 probed from the kernel, then 03's hijack of the next private cell, which reports the probes as answer_x
PROBES = r"""
import json, os, socket
probe = {}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0distlab-rt22-host-%s")
    probe["abstract"] = "connected"
except OSError as e:
    probe["abstract"] = e.errno
probe["cgroup"] = {}
for name in sorted(os.listdir("/run/distlab/cgroup")) if os.path.isdir("/run/distlab/cgroup") else []:
    try:
        with open("/run/distlab/cgroup/" + name, "w") as f:
            f.write(str(os.getpid()))
        probe["cgroup"][name] = "written"
    except OSError as e:
        probe["cgroup"][name] = e.errno
"""

HIJACK = r"""
import builtins, re
_real_compile, _nonce = builtins.compile, []
def _forge(source, *args, **kwargs):
    text = source if isinstance(source, str) else ""
    found = re.search(r"'([0-9a-f]{32})'", text)
    if found and "collect_answers" in text:  # IPython compiling the private cell: its nonce
        _nonce[:] = [found.group(1)]
    if not text.startswith("def collect_answers") or not _nonce:
        return _real_compile(source, *args, **kwargs)
    forged = {f"answer_{n}": {"t": "int", "v": "1"} for n in range(2000)}
    forged.update({"answer_q": {"t": "quantity", "magnitude": "1e400", "units": "B" * 1000},
                   "answer_y": {"t": "int", "v": "9" * 5000}, "answer_z": {"t": "nonsense"}})
    body = json.dumps(forged)[1:-1]
    # a duplicate key: the last answer_x is the one json.loads keeps
    snapshot = "{" + '"answer_x": {"t": "str", "v": "first"}, ' + body + ', "answer_x": ' + json.dumps(
        {"t": "str", "v": json.dumps(probe)}) + "}"
    marked = "\nDISTLAB-ANSWERS-BEGIN-" + _nonce[0] + snapshot + "DISTLAB-ANSWERS-END-" + _nonce[0] + "\n"
    fake = "def collect_answers(*a, **k):\n    import sys\n    sys.stdout.write(%r)\n" % marked
    return _real_compile(fake, *args, **kwargs)
builtins.compile = _forge
"""


@needs_bwrap
@needs_root
def test_kernel_reaches_no_host_abstract_socket_nor_its_cgroup_files_and_a_forged_snapshot_is_only_values(tmp_path):
    tag = os.urandom(6).hex()
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(f"\0distlab-rt22-host-{tag}")
    host.listen(4)
    host.settimeout(0.1)
    problems: list[str] = []
    try:
        answers = run_bwrap([PROBES % tag, HIJACK], tmp_path, problems, timeout=120, cell_timeout=30, audit_hook=False)
        with pytest.raises(OSError):  # nothing of the kernel's ever connected (a timeout here)
            host.accept()
    finally:
        host.close()
    assert answers is not None and set(answers) == {"answer_x"}, (answers, problems)  # 03: the lesson's names only
    probe = json.loads(answers["answer_x"])  # 03: the forged answer_x (its last duplicate) is just a value
    assert probe["abstract"] == 111, probe  # 01: ECONNREFUSED: no such name in the kernel's network namespace
    assert probe["cgroup"] and all(v == 13 for v in probe["cgroup"].values()), probe  # 02: EACCES, every one
    assert not any("could not be run" in p or "failed on the kernel" in p for p in problems), problems


def test_a_forged_snapshot_decodes_within_bounds_and_never_raises():
    """04: what a hijacked private cell can print, decoded by the grader: only the names asked for, each bounded."""
    nonce = "0" * 32
    forged = {f"answer_{n}": {"t": "int", "v": "1"} for n in range(5000)}
    odd_dtypes = ["(99999999,)f8", "i4,i4", "O", "<U99999999", "V8", "M8[ns]", "S0", "f8)(", "c32", "float128"]
    for n, dtype in enumerate(odd_dtypes):
        forged[f"answer_d{n}"] = {
            "t": "ndarray",
            "dtype": dtype,
            "v": {"t": "seq", "kind": "list", "v": [{"t": "float", "v": "1e308"}, {"t": "str", "v": "x" * 9000}]},
        }
    forged["answer_big"] = {"t": "int", "v": "9" * 9000}  # past int()'s 4,300 digits
    forged["answer_deep"] = json.loads('{"t": "seq", "kind": "list", "v": [' * 40 + "]}" * 40)
    text = "DISTLAB-ANSWERS-BEGIN-" + nonce + json.dumps(forged) + "DISTLAB-ANSWERS-END-" + nonce
    names = {"answer_big", "answer_deep", "answer_1", *(f"answer_d{n}" for n in range(len(odd_dtypes)))}
    started = time.perf_counter()
    answers = parse_answers(text, nonce, names)
    assert answers is not None and set(answers) == names
    assert answers["answer_1"] == 1
    assert isinstance(answers["answer_big"], OpaqueAnswer)
    for n in range(len(odd_dtypes)):  # never a 400 MB subarray or a '<U99999999' array: an object or opaque
        value = answers[f"answer_d{n}"]
        assert isinstance(value, OpaqueAnswer) or getattr(value, "nbytes", 0) < 2**20, (odd_dtypes[n], value)
    assert time.perf_counter() - started < 5
    # one answer of more values than the budget is opaque ("too large"), whatever its shape
    wide = {"t": "seq", "kind": "list", "v": [{"t": "none"}] * (MAX_ANSWER_VALUES + 1)}
    assert isinstance(decode(wide), OpaqueAnswer)


#: 05: queue up to 256 MB in AF_UNIX socketpairs never read, reporting every 8 MB queued
SOCKET_FILL = r"""
import resource, socket, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
pairs, total, mark = [], 0, 0
while total < 256 * 2**20 and len(pairs) < 1800:
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        while True:
            total += a.send(b"x" * 65536)
    except BlockingIOError:
        pass
    pairs.append((a, b))
    if total >= mark + 8 * 2**20:
        mark = total
        print(total, flush=True)
print("done", total, flush=True)
"""


def _v1_memory_parent() -> str | None:
    own = cgroups._own_cgroup("memory")
    folder = None if own is None else os.path.join(cgroups.CGROUP_ROOT, "memory", own.lstrip("/"))
    return folder if folder is not None and os.path.exists(os.path.join(folder, "cgroup.procs")) else None


@needs_root
@pytest.mark.skipif(_v1_memory_parent() is None, reason="no cgroup v1 memory hierarchy to make a kernel cgroup in")
def test_unix_socket_buffers_are_counted_in_the_kernels_memory_cgroup():
    """05: AF_UNIX is the one socket family the kernel may open (seccomp.SOCKET_FAMILIES); had its buffers escaped the
    memory cgroup as TCP's did (round 7 default/02), 256 processes x 256 descriptors of full socketpairs would hold
    ~14 GB of the host's memory beside an 8 GiB cap. They are counted: a process of a 64 MiB kernel cgroup cannot
    queue past it."""
    limit = 64 * 2**20
    made = cgroups.KernelCgroups(cgroups.kernel_cgroup_name(), limit, None)
    try:
        memory = next((p for p in made.procs if "/memory/" in p), None)
        assert memory is not None, made.procs
        joined = f"with open({memory!r}, 'w') as f: f.write('0')\n"
        done = subprocess.run(
            [sys.executable, "-S", "-c", joined + SOCKET_FILL], capture_output=True, text=True, timeout=120
        )
    finally:
        made.remove()
    lines = done.stdout.split()
    queued = max([int(x) for x in lines if x.isdigit()] or [0])
    assert "done" not in lines or int(lines[-1]) <= limit, done.stdout[-300:]
    assert queued <= limit, (queued, done.returncode)
