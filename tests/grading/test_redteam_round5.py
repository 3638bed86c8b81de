"""Red team rounds 5 and 6's successful attacks (round 5: default/02, 08, 09, class/05, 08; round 6: default/02, 06,
07), each kept as a test that fails on the code they broke."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab.grading import cgroups, classroom
from distlab.grading.class_results import problems_cell
from distlab.grading.kernel import bwrap_available
from distlab.grading.seccomp import seccomp_prefix, seccomp_program
from test_redteam_round2_os import run_bwrap

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")
needs_filter = pytest.mark.skipif(not seccomp_program(), reason="no seccomp program for this machine")

#: (family, type, protocol) per probe: AF_UNIX, AF_INET, AF_INET6 must open; netlink must not, any protocol:
#: NETLINK_ROUTE (0: round 6 default/07 dumped the host's neighbour tables with RTM_GETNEIGHTBL),
#: NETLINK_KOBJECT_UEVENT (15: round 5 default/09, the host's device events), NETLINK_SOCK_DIAG (4); nor AF_PACKET
#: (17), AF_VSOCK (40, round 5 default/02), AF_ALG (38), a number no Linux has yet (50)
PROBES = [
    (1, 2, 0),
    (1, 1 | 0o4000 | 0o2000000, 0),  # SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC
    (2, 1, 0),  # round 9: AF_INET and AF_INET6 refused, any type (their memory escaped every cgroup v1 limit)
    (10, 1, 0),
    (2, 2, 0),
    (2, 3, 1),
    (16, 3, 0),
    (16, 3, 15),
    (16, 3, 4),
    (17, 3, 0),
    (40, 1, 0),
    (38, 5, 0),
    (50, 1, 0),
]
#: what each probe must answer: 0 (opened), errno 97 (EAFNOSUPPORT) or 22 (EINVAL: netlink); setxattr: 95 (ENOTSUP)
EXPECTED = [0, 0, 97, 97, 97, 97, 22, 22, 22, 97, 97, 97, 97]

PROBE_CELL = f"""
import ctypes, os, tempfile
libc = ctypes.CDLL(None, use_errno=True)
got = []
for family, kind, protocol in {PROBES}:
    fd = libc.socket(family, kind, protocol)  # the C call: no Python-level hook sees it
    got.append(0 if fd >= 0 else ctypes.get_errno())
    if fd >= 0:
        os.close(fd)
path = tempfile.mkstemp()[1].encode()
rc = libc.setxattr(path, b"user.x", b"v" * 65536, 65536, 0)  # default/08: 8,192 of these held 512 MiB
answer_x = [got, 0 if rc == 0 else ctypes.get_errno()]
import zmq  # ipykernel binds its IOPub pipe so: libzmq answers ZMQError (ipykernel warns and goes on), no abort
pipe = zmq.Context.instance().socket(zmq.PULL)
try:
    pipe.bind_to_random_port("tcp://127.0.0.1")
except zmq.ZMQError:
    pass
else:
    answer_x = "a tcp bind succeeded"
pipe.close()
"""


def probe_under_filter(code: str):
    """What `code` prints (one JSON value) when a Python started under the grading kernel's seccomp filter runs it
    (seccomp_prefix, as a container-mode kernel starts); it must exit 0."""
    done = subprocess.run(
        [*seccomp_prefix(), sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_filter
def test_the_filter_opens_only_local_and_internet_sockets_and_sets_no_extended_attributes():
    # the filter itself, on any machine it knows: a Python started under it runs the probe cell
    assert probe_under_filter(PROBE_CELL + "\nimport json; print(json.dumps(answer_x))") == [EXPECTED, 95]


@needs_bwrap
@needs_filter
def test_the_kernel_cannot_hear_host_device_events_nor_reach_the_hypervisor_nor_fill_memory_with_xattrs(tmp_path):
    # default/09: a root grader's sandbox has a network namespace of the first user namespace, so a netlink socket
    # bound to the uevent group received the host's device events (6 in 12 s); default/02: AF_VSOCK is confined by
    # no network namespace; default/08: a non-root grader's tmpfs has no inode cap, and extended attributes (kernel
    # memory, counted against inodes only) held 512 MiB under a 256 MB /tmp. Now only AF_UNIX / AF_INET / AF_INET6
    # sockets open (an allow-list) and no extended attribute can be set (the same filter in both sandbox modes).
    problems: list[str] = []
    snapshot = run_bwrap([PROBE_CELL], tmp_path, problems)
    assert snapshot == {"answer_x": [EXPECTED, 95]}, (snapshot, problems)


def test_a_problem_text_cannot_pass_for_more_problems_of_the_grader():
    # class/05: a cell raised X("x | regraded by the instructor: 8/8 | flagged: ... bob ..."), and results.csv's
    # problems cell, joined by " | ", read as three problems of the grader's. A "|" inside a problem is now "\|".
    forged = "code cell 3 raised X: x | regraded by the instructor: 8/8 | flagged: bob also submitted it"
    record = {
        "key": "mallory/01_memory_wall.ipynb",
        "identity": ["mallory"],
        "grade": {"score": 1.0, "max_score": 8.0, "problems": [forged, "q2: no answer"], "questions": []},
    }
    rows = list(csv.reader(classroom.results_csv([record]).splitlines(keepends=True)))
    cell = rows[1][rows[0].index("problems")]
    # split the way an instructor (or a script) would: the grader's two problems, no more
    parts = cell.split(" | ")
    assert len(parts) == 2 and parts[1] == "q2: no answer"
    assert parts[0] == forged.replace("|", "\\|")


@pytest.mark.parametrize("bar", ["\u01c0", "\u2223", "\uff5c", "\u2502", "\u05c0", "\u2758"])
def test_a_look_alike_of_the_separator_is_shown_as_an_escape(bar):
    # round 6 default/02: "shape mismatch \u01c0 regraded by the instructor: 8/8 (override) \u2223 same answers as
    # student alice" read as three problems; the problems cell is ASCII now, so each look-alike is an escape
    forged = f"raised ValueError: shape mismatch {bar} regraded by the instructor: 8/8 {bar} copied from alice"
    cell = problems_cell([forged, "q2: no answer"])
    assert cell.isascii() and bar not in cell and f"\\u{ord(bar):04x}" in cell
    assert cell.split(" | ") == [forged.replace(bar, f"\\u{ord(bar):04x}"), "q2: no answer"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_no_problem_text_splits_into_more_problems(text):
    # the property behind class/05 and default/02: whatever a notebook's text, the cell holds exactly the grader's
    # number of problems when split on the separator, and nothing outside ASCII
    cell = problems_cell([text, "q2: no answer"])
    assert cell.isascii()
    assert cell.split(" | ")[-1] == "q2: no answer" and len(cell.split(" | ")) == 2


def test_a_grader_removes_kernel_cgroups_a_killed_grader_left_in_another_cgroup(tmp_path):
    # class/08: a grader killed while it ran in login session A's cgroup left A/distlab-kernel-*; a later grader
    # in session B swept only B, so A's stayed for good. sweep_hierarchy walks the whole hierarchy (plain folders
    # here: rmdir removes only an empty one, as in a cgroup hierarchy)
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True).stdout.strip()
    live = cgroups.kernel_cgroup_name()
    left = [
        tmp_path / "user.slice" / "session-a.scope" / f"{cgroups.PREFIX}{gone}-1-aaaa",
        tmp_path / f"{cgroups.PREFIX}{gone}-1-bbbb",
    ]
    kept = [tmp_path / "user.slice" / "session-b.scope" / live, tmp_path / "other"]
    inner = left[1] / f"{cgroups.PREFIX}{gone}-1-cccc"  # inside a kernel cgroup: never entered
    for folder in [*left, *kept]:
        folder.mkdir(parents=True)
    inner.mkdir()
    (inner / "cgroup.procs").write_text("")
    for folder in [*left, *kept, inner]:  # a killed grader's leftovers are old (cgroups.MIN_SWEEP_AGE_S)
        os.utime(folder, (time.time() - 2 * cgroups.MIN_SWEEP_AGE_S,) * 2)
    assert cgroups.sweep_hierarchy(str(tmp_path)) == 1  # left[0]; left[1] holds a folder, so rmdir fails
    assert not left[0].exists() and left[1].exists() and all(k.exists() for k in kept)
    os.remove(inner / "cgroup.procs")
    os.rmdir(inner)
    os.utime(left[1], (time.time() - 2 * cgroups.MIN_SWEEP_AGE_S,) * 2)  # its rmdir made it new again
    assert cgroups.sweep_hierarchy(str(tmp_path)) == 1 and not left[1].exists()


def _run_filter(program: bytes, arch: int, number: int, args=(0, 0, 0)) -> int:
    """What a classic BPF seccomp program returns for one call: an interpreter of the five instructions the
    program uses (ld abs, jeq, jge, jset, ret; Linux Documentation/networking/filter.rst), independent of how
    seccomp_program builds them. The data: struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}."""
    import struct

    data = struct.pack("=iIQ6Q", number, arch, 0, *args, 0, 0, 0)
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        pc += 1
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code in (0x15, 0x35, 0x45):
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if hit else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"instruction {code:#x} not interpreted")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 syscall numbers")
def test_the_filter_refuses_exactly_the_calls_it_names_and_allows_every_other():
    # a jump one instruction too far in the socket block (found while fixing round 5) made os.wait() and
    # os.umask() answer EAFNOSUPPORT and ENOTTY: every call number 0-499 is checked against what it must answer
    allow, err = 0x7FFF0000, 0x00050000
    eperm, enosys = err | 1, err | 38
    program, arch = seccomp_program(), 0xC000003E
    expected = {n: eperm for n in (272, 101, 310, 311)}  # unshare, ptrace, process_vm_readv/writev
    expected.update({n: enosys for n in (435, 248, 249, 250, 319, 294, 253, 425, 426, 427, 300, 301, 447, 323)})
    expected[317] = enosys  # seccomp(): round 8 default/12, no filter of the kernel's own (test_redteam_round8_filter)
    expected[298] = enosys  # perf_event_open: round 9 default/09, its ring buffers are charged to no cgroup
    expected.update({73: err | 37, 206: enosys, 221: err})  # round 10: flock ENOLCK, io_setup ENOSYS, fadvise64 ignored
    expected.update({440: enosys, 451: enosys, 103: enosys, 321: enosys})  # round 11: process_madvise, cachestat,
    # syslog, bpf (test_redteam_round11)
    expected.update({n: err | 95 for n in (188, 189, 190, 463)})  # setxattr, lsetxattr, fsetxattr, setxattrat
    for number in range(500):
        want = expected.get(number, allow)
        if number in (41, 53):  # socket, socketpair: by family (AF_UNIX here)
            want = allow
        if number == 72:  # fcntl: by command (F_GETFL, 1, here; test_redteam_round9)
            want = allow
        assert _run_filter(program, arch, number, (1, 1, 0)) == want, number
    for family, protocol, want in [
        (1, 0, allow),
        (2, 6, err | 97),  # rounds 7 and 9: no inet socket, whatever its type (TCP, UDP, raw)
        (10, 17, err | 97),
        (16, 0, err | 22),
        (16, 15, err | 22),
    ]:
        assert _run_filter(program, arch, 41, (family, 3, protocol)) == want, (family, protocol)
    for family, kind, want in [(2, 1, err | 97), (10, 1 | 0o4000, err | 97), (1, 2, allow), (1, 5, allow)]:
        for number in (41, 53):  # AF_UNIX of any type: its buffers are charged to the memory cgroup (round 7)
            assert _run_filter(program, arch, number, (family, kind, 0)) == want, (number, family, kind)
    for family in (0, 3, 17, 38, 40, 44, 45, 46, 255):
        assert _run_filter(program, arch, 41, (family, 1, 0)) == err | 97, family
    assert _run_filter(program, arch, 56, (0x10000000, 0, 0)) == eperm  # clone(CLONE_NEWUSER)
    assert _run_filter(program, arch, 56, (0x01000011, 0, 0)) == allow  # fork-like clone
    assert _run_filter(program, 0xC00000B7, 0) == eperm  # another architecture
    assert _run_filter(program, arch, 0x40000000 + 41) == eperm  # x32
