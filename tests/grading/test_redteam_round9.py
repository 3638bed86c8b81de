"""Red team round 9: kernel memory and host activity no cgroup or namespace covers, and an error its outputs hide.

- default/01: loopback TCP connections that no one accepts hold their data in sockets with no descriptor, charged to
  no memory cgroup (240 MiB past the 64 MiB kmem.tcp cap). The kernel now opens no inet socket at all
  (seccomp.SOCKET_FAMILIES: AF_UNIX only; test_redteam_round7 and test_redteam_round5 check the sandbox and filter).
- default/03: fcntl byte-range locks on alternating bytes: 582,036 locks, 111 MB of the host's unreclaimable slab,
  the kernel's cgroup flat. fcntl's lock commands now answer ENOLCK (a full lock table).
- default/05: dnotify (fcntl F_NOTIFY) reported host processes' activity in the folders bound in, as inotify did.
  F_NOTIFY and F_SETLEASE (a lease on a file bound in would make a host process wait) answer EINVAL.
- default/09: perf_event_open's ring buffers (124-183 MiB) beside an unmoved memory cgroup. It answers ENOSYS.
- default/08: an IPython post_run_cell hook cleared each cell's outputs after its error was published, and the report
  showed no problem at all. A cell whose execute_reply failed is a problem whatever its outputs show (kernel.py).
"""

from __future__ import annotations

import os

import pytest
from test_grade import IMPORTS, write_notebook
from test_redteam_round5 import _run_filter, probe_under_filter

from distlab.grading import grade
from distlab.grading.sandbox import bwrap_available
from distlab.grading.seccomp import FCNTL_LOCKS, FCNTL_NOTICES, seccomp_program

PROBE = r"""
import ctypes, fcntl, json, os, socket, struct, tempfile
libc = ctypes.CDLL(None, use_errno=True)
out = {}
folder = tempfile.mkdtemp()
path = os.path.join(folder, "f")
fd = os.open(path, os.O_RDWR | os.O_CREAT)
os.write(fd, b"x" * 64)
lock = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 1, 0)  # struct flock: type, whence, start, len, pid
for name, cmd in (("setlk", fcntl.F_SETLK), ("setlkw", fcntl.F_SETLKW), ("ofd_setlk", 37)):
    try:
        fcntl.fcntl(fd, cmd, lock)
        out[name] = 0
    except OSError as e:
        out[name] = e.errno
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    out["lockf"] = 0
except OSError as e:
    out["lockf"] = e.errno
dfd = os.open(folder, os.O_RDONLY)
for name, cmd, arg in (("notify", 1026, 0x1), ("setlease", 1024, fcntl.F_RDLCK)):
    rc = libc.fcntl(dfd if name == "notify" else os.open(path, os.O_RDONLY), cmd, arg)
    out[name] = 0 if rc >= 0 else ctypes.get_errno()
out["getfl"] = 0 if libc.fcntl(fd, fcntl.F_GETFL) >= 0 else ctypes.get_errno()
out["setfd"] = 0 if libc.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC) >= 0 else ctypes.get_errno()
attr = (ctypes.c_ubyte * 128)()  # struct perf_event_attr: software event, the task's own clock
struct.pack_into("=IIQ", attr, 0, 1, 128, 0)
rc = libc.syscall(298, ctypes.byref(attr), 0, -1, -1, 0)
out["perf"] = 0 if rc >= 0 else ctypes.get_errno()
for name, family in (("inet", socket.AF_INET), ("inet6", socket.AF_INET6)):
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
        out[name] = 0
    except OSError as e:
        out[name] = e.errno
a, b = socket.socketpair()
out["unix"] = 0
print(json.dumps(out))
"""


@pytest.mark.skipif(not seccomp_program(), reason="no seccomp program for this machine")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe calls perf_event_open by its x86-64 number")
def test_no_locks_leases_dnotify_perf_events_nor_inet_sockets_under_the_filter():
    # ENOLCK 37, EINVAL 22, ENOSYS 38, EAFNOSUPPORT 97; without the filter (root, this machine) every one is 0
    assert probe_under_filter(PROBE) == {
        "setlk": 37,
        "setlkw": 37,
        "ofd_setlk": 37,
        "lockf": 37,
        "notify": 22,
        "setlease": 22,
        "getfl": 0,
        "setfd": 0,
        "perf": 38,
        "inet": 97,
        "inet6": 97,
        "unix": 0,
    }


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 syscall numbers")
def test_the_filter_refuses_exactly_the_lock_lease_and_notify_commands_of_fcntl():
    allow, err = 0x7FFF0000, 0x00050000
    program, arch = seccomp_program(), 0xC000003E
    for cmd in [*range(0, 64), *range(1024, 1040), 0xFFFFFFFF]:
        want = err | 37 if cmd in FCNTL_LOCKS else err | 22 if cmd in FCNTL_NOTICES else allow
        assert _run_filter(program, arch, 72, (3, cmd, 0)) == want, cmd
    assert _run_filter(program, arch, 298, (0, 0, 0)) == err | 38  # perf_event_open
    assert _run_filter(program, arch, 73, (3, 2, 0)) == err | 37  # flock: refused since round 10 (test_redteam_round10)


HIDE_ERRORS = """from IPython.display import clear_output
get_ipython().events.register(
    "post_run_cell", lambda r: None if "DISTLAB-ANSWERS" in (r.info.raw_cell or "") else clear_output()
)"""


@pytest.mark.notebook
@pytest.mark.parametrize(
    "sandbox",
    [pytest.param("bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="no bubblewrap")), "trusted"],
)
def test_a_cell_whose_outputs_are_cleared_after_its_error_is_still_a_problem(tmp_path, sandbox):
    cells = [IMPORTS, HIDE_ERRORS, "answer_q2 = 1 / 0", 'answer_q1 = 16\nraise ValueError("after answer_q1")']
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", cells)
    result = grade.grade_notebook(path, sandbox=sandbox, cell_timeout=60).to_dict()
    problems = result["problems"]
    # round 9 default/08: "problems": [] before (the hook cleared each error after it was published)
    assert any(p.startswith("code cell 3 (`answer_q2 = 1 / 0`) raised") and "ZeroDivisionError" in p for p in problems)
    assert any(p.startswith("code cell 4 (`answer_q1 = 16`) raised") and "ValueError" in p for p in problems)
    assert result["score"] == 1, result
