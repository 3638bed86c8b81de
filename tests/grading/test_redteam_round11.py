"""Red team round 11: page-cache eviction and probing past the round-10 filter.

- default/03: process_madvise(2) on the kernel's own pidfd is madvise by another number (Linux 6.13 dropped its
  CAP_SYS_NICE check for the calling process), so MADV_PAGEOUT, which round 10 made madvise ignore, still dropped a
  file's pages from the host's page cache wherever the kernel's user owns or may write the file: with a grader that is
  not root, every file of the grader's own user bound in (its virtual environment, its ~/.local site-packages). Graded
  so, a notebook evicted a numpy test file of the grader's environment, then saw both times a host process read it (at
  the second), the round-10 default/07 side channel again. cachestat(2) (Linux 6.5) told it, with no timing, how many
  of the file's pages were cached. Both now answer ENOSYS, as on a Linux without them. A root grader's kernel (a fresh
  user id) owns none of the host's files: there cachestat already answered EPERM and the page-out did nothing.
"""

from __future__ import annotations

import os

import pytest
from test_redteam_round5 import _run_filter, probe_under_filter

from distlab.grading.seccomp import seccomp_program

PAGE_OUT_PROBE = r"""
import ctypes, json, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
def call(*args):
    rc = libc.syscall(*args)
    return rc if rc >= 0 else -ctypes.get_errno()
path = os.path.join(tempfile.mkdtemp(), "f")  # a file of this user's, as the grader's own files are to its kernel
size = 64 * 4096
with open(path, "wb") as f:
    f.write(os.urandom(size))
fd = os.open(path, os.O_RDONLY)
os.fsync(os.open(path, os.O_RDWR))  # clean pages: a page-out can drop them at once
rng, stat = (ctypes.c_uint64 * 2)(0, 0), (ctypes.c_uint64 * 5)()
out = {"cachestat": call(451, fd, ctypes.byref(rng), ctypes.byref(stat), 0)}  # cachestat(fd, range, stat, 0)
address = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
ctypes.string_at(address, size)  # every page mapped by this process alone

class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

pidfd = call(434, os.getpid(), 0)  # pidfd_open(self)
out["process_madvise"] = call(440, pidfd, ctypes.byref(IOV(address, size)), 1, 21, 0)  # MADV_PAGEOUT
print(json.dumps(out))
"""


@pytest.mark.skipif(not seccomp_program(), reason="no seccomp program for this machine")
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="440 and 451 on both machines only")
def test_no_page_out_by_process_madvise_nor_cachestat_under_the_filter():
    # ENOSYS 38; before: process_madvise returned the 262,144 bytes it paged out, cachestat 0 (Linux 6.18)
    assert probe_under_filter(PAGE_OUT_PROBE) == {"cachestat": -38, "process_madvise": -38}


@pytest.mark.parametrize("machine, arch", [("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)])
def test_the_filter_answers_enosys_to_process_madvise_and_cachestat(monkeypatch, machine, arch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: machine)
    program, enosys = seccomp_program(), 0x00050000 | 38
    assert _run_filter(program, arch, 440, (3, 0, 1)) == enosys  # process_madvise, whatever its advice (args[3])
    assert _run_filter(program, arch, 451, (3, 0, 0)) == enosys  # cachestat
    assert _run_filter(program, arch, 448, (3, 0, 0)) == 0x7FFF0000  # process_mrelease: a dying process's memory
