"""Red team round 11: page-cache eviction and probing past the round-10 filter.

- default/03: process_madvise(2) on the kernel's own pidfd is madvise by another number (Linux 6.13 dropped its
  CAP_SYS_NICE check for the calling process), so MADV_PAGEOUT, which round 10 made madvise ignore, still dropped a
  file's pages from the host's page cache wherever the kernel's user owns or may write the file: with a grader that is
  not root, every file of the grader's own user bound in (its virtual environment, its ~/.local site-packages). Graded
  so, a notebook evicted a numpy test file of the grader's environment, then saw both times a host process read it (at
  the second), the round-10 default/07 side channel again. cachestat(2) (Linux 6.5) told it, with no timing, how many
  of the file's pages were cached. Both now answer ENOSYS, as on a Linux without them. A root grader's kernel (a fresh
  user id) owns none of the host's files: there cachestat already answered EPERM and the page-out did nothing.
- default/06 and 07: nothing limited the kernel's use of the host's disks. sync() made about 12,000 disk cache flushes
  a second (ext4 flushes on every call), and O_DIRECT reads of numpy's libraries read 20,596 MiB of the host's disk in
  20 s, past the page cache the memory cgroup counts. A root grader's kernel now has a blkio cgroup that throttles
  every disk (cgroups.KERNEL_DISK_*). default/08, against that fix: a thread waiting on a throttled request cannot die,
  so 16 threads of queued direct reads outlived their grading by 100 s; the limits are lifted before the kill.
"""

from __future__ import annotations

import os

import pytest
from test_redteam_round2_os import run_bwrap
from test_redteam_round5 import _run_filter, probe_under_filter

from distlab.grading.sandbox import bwrap_available
from distlab.grading.seccomp import seccomp_program

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")

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
def test_the_filter_answers_enosys_to_process_madvise_cachestat_syslog_and_bpf(monkeypatch, machine, arch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: machine)
    program, enosys = seccomp_program(), 0x00050000 | 38
    assert _run_filter(program, arch, 440, (3, 0, 1)) == enosys  # process_madvise, whatever its advice (args[3])
    assert _run_filter(program, arch, 451, (3, 0, 0)) == enosys  # cachestat
    syslog, bpf = {"x86_64": (103, 321), "aarch64": (116, 280)}[machine]
    assert _run_filter(program, arch, syslog, (10, 0, 0)) == enosys
    assert _run_filter(program, arch, bpf, (0, 0, 128)) == enosys
    assert _run_filter(program, arch, 448, (3, 0, 0)) == 0x7FFF0000  # process_mrelease: a dying process's memory


#: default/07: the kernel reads the host's disk past its page cache, as fast as the disk goes. answer_x: 4 kB reads of
#: the largest host file bound in (numpy's shared libraries), each from the disk (O_DIRECT), per second of 2 s; None
#: where O_DIRECT is refused
DIRECT_READS = r"""
import glob, mmap, os, time, numpy
target = max(glob.glob(os.path.dirname(numpy.__file__) + "/**/*.so", recursive=True), key=os.path.getsize)
size = os.path.getsize(target) // 4096 * 4096
buf = mmap.mmap(-1, 4096)
def rate(flags, rwf):
    try:
        fd = os.open(target, os.O_RDONLY | flags)
        count, start = 0, time.time()
        while time.time() - start < 2:
            os.preadv(fd, [buf], (count * 4096) % size, rwf)
            count += 1
        os.close(fd)
        return count / (time.time() - start)
    except OSError:
        return None
answer_x = {"direct": rate(os.O_DIRECT, 0)}
"""


def _disk_counts() -> tuple[int, int]:
    """(reads completed, flush requests completed) of every whole disk of this machine (/proc/diskstats)."""
    reads = flushes = 0
    disks = set(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else set()
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if fields[2] in disks:
                reads += int(fields[3])
                flushes += int(fields[18]) if len(fields) > 18 else 0
    return reads, flushes


HOST_LOG_AND_BPF_PROBE = r"""
import ctypes, json, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(*args):
    rc = libc.syscall(*args)
    return rc if rc >= 0 else -ctypes.get_errno()
out = {"syslog": call(103, 10, None, 0)}  # SYSLOG_ACTION_SIZE_BUFFER
attr = (ctypes.c_ubyte * 128)()
struct.pack_into("=IIII", attr, 0, 2, 4, 4, 1)  # BPF_MAP_CREATE: an array map of one 4-byte value
out["bpf"] = call(321, 0, ctypes.byref(attr), 128)
print(json.dumps(out))
"""


@pytest.mark.skipif(not seccomp_program(), reason="no seccomp program for this machine")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe calls syslog and bpf by their x86-64 numbers")
def test_no_host_kernel_log_nor_bpf_under_the_filter_whatever_the_host_allows():
    # hardening (default/05): the sandbox's user could read neither here only because of this host's settings
    # (kernel.dmesg_restrict=1, kernel.unprivileged_bpf_disabled=2); before, a root process under the filter got the
    # log's size (131,072) and a BPF map (a descriptor). Now ENOSYS (38) whoever asks and whatever the host allows
    assert probe_under_filter(HOST_LOG_AND_BPF_PROBE) == {"syslog": -38, "bpf": -38}


@needs_bwrap
def test_the_kernel_cannot_read_the_host_disk_at_its_full_speed(tmp_path):
    # graded so (default/07), a notebook read 20,596 MiB of numpy's libraries with O_DIRECT in 20 s, and the host's
    # disk counted 21,320 MiB read: 1 GB/s of the host's disk for as long as the notebook's time limit, 256 processes
    # of it at once, no limit of the sandbox's in the way (its memory cgroup does not count reads it does not cache)
    problems: list[str] = []
    reads = _disk_counts()[0]
    found = (run_bwrap([DIRECT_READS], tmp_path, problems) or {}).get("answer_x")
    reads = _disk_counts()[0] - reads
    assert isinstance(found, dict), problems
    rates = [r for r in found.values() if r is not None]
    if not rates or reads < 100:
        pytest.skip(f"this machine's disk serves no direct read here ({found}, {reads} reads)")
    assert max(rates) < 1500, (found, reads)  # 4 kB reads per second: 0.6 s of them at 2,500 IOPS, say


#: default/06: sync() from the kernel makes every file system of the host flush its disk's write cache (ext4 sends a
#: flush whether or not anything was dirty); answer_x: how many sync() calls it made, in how many seconds (2 s at most)
SYNC_STORM = r"""
import os, time
count, start = 0, time.time()
while time.time() - start < 2:
    os.sync()
    count += 1
answer_x = [count, time.time() - start]
"""


@needs_bwrap
def test_the_kernel_cannot_flood_the_host_disks_with_cache_flushes(tmp_path):
    # graded so (default/06), 371,278 sync() calls in 25 s, 12,000 flush requests a second on the host's disk (its own
    # 4 kB fsync writes went from 0.09 to 0.12 ms here, a virtual disk; a real one pays a cache flush each)
    problems: list[str] = []
    flushes = _disk_counts()[1]
    found = (run_bwrap([SYNC_STORM], tmp_path, problems) or {}).get("answer_x")
    flushes = _disk_counts()[1] - flushes
    assert isinstance(found, list), problems
    calls, seconds = found
    if flushes < calls / 10:
        pytest.skip(f"sync() flushes no disk here ({calls} calls, {flushes} flushes)")
    assert calls / seconds < 300, (calls, seconds, flushes)  # flushes are throttled: at most a few hundred a second


#: default/08, against the fix: threads each waiting on one direct read of a whole shared library; under the disk
#: limits a thread waiting on a throttled request cannot die until it is served (16 threads of 414 MiB lived 100 s
#: past their grading, and the grader left their cgroups behind)
QUEUED_READS = r"""
import glob, mmap, os, threading, time, numpy
target = max(glob.glob(os.path.dirname(numpy.__file__) + "/**/*.so", recursive=True), key=os.path.getsize)
size = os.path.getsize(target) // 4096 * 4096
def reader():
    buf = mmap.mmap(-1, size)
    fd = os.open(target, os.O_RDONLY | os.O_DIRECT)
    while True:
        os.preadv(fd, [buf], 0)
for _ in range(96):  # about 3 GB queued at once (numpy's largest library, 30 MB here): 45 s at the read limit
    threading.Thread(target=reader, daemon=True).start()
time.sleep(60)
"""


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="a root grader's kernel cgroups")
def test_a_kernel_waiting_on_throttled_reads_dies_with_its_grading(tmp_path):
    import glob

    problems: list[str] = []
    run_bwrap([QUEUED_READS], tmp_path, problems, timeout=30, cell_timeout=5)
    assert any("time limit" in p for p in problems), problems
    # the disk limits are lifted before the kernel is killed: its queue drains, it dies, its cgroups go
    left = glob.glob(f"/sys/fs/cgroup/*/**/distlab-kernel-{os.getpid()}-*", recursive=True)
    assert left == [], left
