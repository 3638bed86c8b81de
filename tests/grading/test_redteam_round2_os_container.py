"""Red team round 2, the container mode's operating-system boundary (the generated run_autograder's phase 1): what
the notebook's unprivileged user could reach or keep outside its limits. One run of the autograder per mode; each
test FAILS on the code the attacks ran against (see test_redteam_round2_os.py for the bubblewrap mode)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from class_helpers import needs_unprivileged_python
from distlab.grading.sandbox import kill_user
from test_redteam_container import ESCAPE, KERNEL_UID, NO_NAMESPACES, _autograder, _run, _submit

pytestmark = [
    pytest.mark.notebook,
    needs_unprivileged_python,
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 syscalls"),
]

#: a fresh Python of the notebook's user (no audit hook) tries each way out; every one that worked is named in
#: answer_q1 (then wrong). x86-64: add_key 248, memfd_create 319; shmget(IPC_PRIVATE, 64 MiB, IPC_CREAT | 0600)
PROBE = r"""
_prog = '''
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
done = []
if libc.syscall(248, b"user", b"rt2-left", b"x" * 3000, 3000, -4) > 0:
    done.append("keyring")
if libc.syscall(319, b"rt2", 0) >= 0:
    done.append("memfd")
if libc.shmget(0, 64 << 20, 0o1600) >= 0:
    done.append("shm-64MiB")
held = []
try:
    while len(held) < 2000:
        held += os.pipe()
except OSError:
    pass
if len(held) >= 2000:
    done.append("files")
try:
    os.close(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    done.append("pty")
except OSError:
    pass
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    done.append("run-socket")
except OSError:
    pass
open("escaped.txt", "w").write(" ".join(done))
'''
os.waitpid(_spawn([sys.executable, "-c", _prog, SERVICE]), 0)
if open("escaped.txt").read():
    answer_q1 = "escaped: " + open("escaped.txt").read()
"""


@pytest.fixture
def folder():
    made = Path(tempfile.mkdtemp(prefix="distlab-redteam-os-"))
    try:
        yield made
    finally:
        kill_user(KERNEL_UID)
        shutil.rmtree(made, ignore_errors=True)


def _probe(base: Path, prefix=()):
    """results.json of one run of PROBE, and the connections a root service in /run got meanwhile."""
    path = f"/run/distlab-rt2-service-{secrets.token_hex(4)}.sock"  # as /dev/log, a D-Bus or docker.sock would lie
    service = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    service.bind(path)
    os.chmod(path, 0o666)
    service.listen(8)
    service.settimeout(0.2)
    seen: list = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                seen.append(service.accept()[0])
            except OSError:
                continue

    threading.Thread(target=serve, daemon=True).start()
    try:
        root, seed = _autograder(base, timeout=120)
        _submit(root, seed, [ESCAPE, PROBE.replace("SERVICE", repr(path))], solved=True)
        result, _ = _run(root, limit=300, prefix=prefix)
    finally:
        stop.set()
        service.close()
        os.unlink(path)
    return result, seen


def _escaped(result) -> str:
    return " ".join(t["output"] for t in (result or {}).get("tests", []) if t["score"] == 0)


def test_phase_one_keeps_keys_memory_files_ptys_and_host_sockets_out_of_reach(folder):
    # container/04-keyring-survives-run: six 3 kB keys of distlab-kernel's user keyring outlived the run (read back
    # by a later process of that user). container/11-memfd-outside-as-and-tmpfs: 640 MB held in memfds under a
    # 256 MB RLIMIT_AS (and Linux's default shmmax lets one System V segment of any size be made).
    # container/08-host-file-table: 76,000 entries of the host's file table from 4 processes (RLIMIT_NOFILE 20,000).
    # container/06-host-pty-exhaustion: 512 of the host's 4,096 ptys held through the host's /dev/ptmx.
    # container/19-unix-socket-past-netns: a root service's socket in /run (mode 0666) was reached from the new
    # network namespace. Now: keyrings and memfd_create answer ENOSYS (the seccomp filter), shmmax is 16 MiB in the
    # private IPC namespace, RLIMIT_NOFILE is 256 (2,000 pipe ends fail), /dev is private (no ptmx) and /run is an
    # empty tmpfs: none of the six works, and the solved notebook scores 8/8
    result, seen = _probe(folder)
    assert result is not None
    assert seen == [], "the notebook reached a root service's socket in /run"
    assert result["score"] == 8.0, _escaped(result)


def test_without_namespaces_keys_memfds_and_files_stay_bounded(folder):
    # container/16-docker-like-rerun: where the container forbids namespaces (Gradescope's Docker), 08 (77,672 host
    # file-table entries) and 11 (640 MB of memfds) held as well. The seccomp filter and RLIMIT_NOFILE do not depend
    # on namespaces: keyring, memfd and files fail there too. (The container's own /dev, /run and IPC namespace stay:
    # the pty, /run socket and System V items are the threat model's "not guaranteed" there.)
    result, _ = _probe(folder, prefix=NO_NAMESPACES)
    assert result is not None
    escaped = _escaped(result)
    assert not any(item in escaped for item in ("keyring", "memfd", "file")), escaped


#: the kernel's stdin socket becomes a link to the relay's own listener (its folder is the kernel user's; the relay's
#: lies beside it, base/relay), then ipykernel's stdin socket is closed so that the grader's zmq reconnects
SELF_LOOP = r"""
import json, time
from ipykernel.connect import get_connection_file
_info = json.load(open(get_connection_file()))
_path = "%s-%d" % (_info["ip"], _info["stdin_port"])
_relay = os.path.join(os.path.dirname(os.path.dirname(_info["ip"])), "relay", "kernel-%d" % _info["stdin_port"])
os.waitpid(_spawn(["/bin/ln", "-sfn", _relay, _path]), 0)
get_ipython().kernel.stdin_socket.close(linger=0)
time.sleep(10)
"""


def _most_descriptors(marker: str, stop: threading.Event, most: list[int]) -> None:
    """Until `stop`: the most descriptors any process whose command line holds `marker` had open (most[0])."""
    while not stop.is_set():
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and marker in open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace"):
                    most[0] = max(most[0], len(os.listdir(f"/proc/{entry}/fd")))
            except OSError:
                continue
        stop.wait(0.2)


@pytest.mark.parametrize("prefix", [(), NO_NAMESPACES], ids=["namespaces", "no-namespaces"])
def test_a_link_to_the_relays_own_listener_does_not_loop_the_root_grader(folder, prefix):
    # red team 3, container/05-relay-connects-to-itself and /08 (without namespaces): the stdin socket's path became a
    # link to the relay's own listener; the relay (root, phase 1) connected through it to itself, again and again:
    # 19,995 descriptors (RLIMIT_NOFILE 20,000) and 447 MB in ~20 s. (/03 and /04: a raw listener or a root-only
    # socket behind the path: 797 leaked descriptors, 33 root connections.) Run here under a 1,024-descriptor cap; the
    # phase-1 grader (`--answers-out`) holds ~60 when grading normally
    root, seed = _autograder(folder, timeout=120)
    _submit(root, seed, [ESCAPE, SELF_LOOP], solved=True)
    stop, most = threading.Event(), [0]
    watcher = threading.Thread(target=_most_descriptors, args=(str(root), stop, most), daemon=True)
    watcher.start()
    try:
        result, _ = _run(root, limit=300, prefix=("prlimit", "--nofile=1024", "--", *prefix))
    finally:
        stop.set()
        watcher.join()
    assert result is not None and result["score"] == 8.0, _escaped(result)
    assert 0 < most[0] < 200, most
