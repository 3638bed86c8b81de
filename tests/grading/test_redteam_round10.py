"""Red team round 10: flock, Linux AIO and page-cache eviction reached the host past the round-9 filter.

- default/03: flock(2) locks live in the same uncharged cache as fcntl's (55 MB the kernel's cgroup did not count; a
  shared mapping keeps a lock alive with no descriptor), and default/05: flock needs no write access, so a lock on a
  host file bound in read-only (the stdlib's os.py) made a host process wait. flock now answers ENOLCK.
- default/06: io_setup's events count against the host-wide fs.aio-max-nr (all 65,536 taken: the host's io_setup
  failed with EAGAIN). io_setup now answers ENOSYS.
- default/07: posix_fadvise(DONTNEED) dropped a bound host file's pages from the host's page cache, and a timed read
  then showed when a host process had read it. posix_fadvise, and madvise's MADV_COLD / MADV_PAGEOUT, are now accepted
  and ignored (they return 0); madvise's other advice (malloc's MADV_DONTNEED) works as before.
The forged execute_reply of default/02 (a kernel hiding its own cell errors) is documented in the threat model: both
signals come from the student's kernel, and hiding them never raises a score.
"""

from __future__ import annotations

import os

import pytest
from test_redteam_round5 import _run_filter, probe_under_filter

from distlab.grading.seccomp import IGNORED_MADVICE, seccomp_program

PROBE = r"""
import ctypes, fcntl, json, mmap, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
out = {}
path = os.path.join(tempfile.mkdtemp(), "f")
with open(path, "wb") as f:
    f.write(b"x" * 8192)
fd = os.open(path, os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    out["flock"] = 0
except OSError as e:
    out["flock"] = e.errno
ctx = ctypes.c_ulong(0)
rc = libc.syscall(206, 1, ctypes.byref(ctx))  # io_setup(1, &ctx)
out["io_setup"] = 0 if rc == 0 else ctypes.get_errno()
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # accepted (returns 0), does nothing
out["fadvise"] = 0
m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m[0] = 7
buf = (ctypes.c_char * 4096).from_buffer(m)
address = ctypes.addressof(buf)
for name, advice in (("pageout", 21), ("cold", 20)):
    rc = libc.madvise(ctypes.c_void_p(address), 4096, advice)
    out[name] = 0 if rc == 0 else ctypes.get_errno()
out["page_kept"] = m[0]  # MADV_PAGEOUT ignored: an anonymous page keeps its byte whatever
rc = libc.madvise(ctypes.c_void_p(address), 4096, 4)  # MADV_DONTNEED, as malloc uses it: a private page is zeroed
out["dontneed"] = 0 if rc == 0 else ctypes.get_errno()
out["page_after_dontneed"] = m[0]
del buf
m.close()
print(json.dumps(out))
"""


@pytest.mark.skipif(not seccomp_program(), reason="no seccomp program for this machine")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe calls io_setup by its x86-64 number")
def test_no_flock_nor_aio_and_page_cache_advice_is_ignored_under_the_filter():
    # ENOLCK 37, ENOSYS 38; without the filter flock and io_setup return 0 (and the context is left to the exit)
    assert probe_under_filter(PROBE) == {
        "flock": 37,
        "io_setup": 38,
        "fadvise": 0,
        "pageout": 0,
        "cold": 0,
        "page_kept": 7,
        "dontneed": 0,
        "page_after_dontneed": 0,
    }


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 syscall numbers")
def test_the_filter_ignores_exactly_the_page_out_advice_of_madvise():
    allow, err = 0x7FFF0000, 0x00050000
    program, arch = seccomp_program(), 0xC000003E
    for advice in range(0, 120):  # madvise(addr, len, advice): advice is args[2]
        want = err if advice in IGNORED_MADVICE else allow  # err | 0: the call returns 0, skipped
        assert _run_filter(program, arch, 28, (0, 4096, advice)) == want, advice
    assert _run_filter(program, arch, 221, (3, 0, 0)) == err  # fadvise64, whatever its advice: returns 0, skipped
    assert _run_filter(program, arch, 73, (3, 1, 0)) == err | 37  # flock
    assert _run_filter(program, arch, 206, (1, 0, 0)) == err | 38  # io_setup
    assert _run_filter(program, arch, 209, (0, 0, 0)) == allow  # io_submit: no context can be made to use it
