"""Red team round 8 default/12: no program of the kernel's own is compiled into memory no cgroup counts.

1,800 classic BPF socket filters (setsockopt(SOL_SOCKET, SO_ATTACH_FILTER), no capability needed) held 84 MiB of
JIT-compiled code in the host's bpf_prog_pack pages, which no memory cgroup counted, drawn from the host-wide
net.core.bpf_jit_limit that every user shares. The seccomp filter now refuses the four options that attach a
program to a socket (EPERM), and a seccomp filter of the kernel's own (seccomp() ENOSYS, prctl(PR_SET_SECCOMP)
EPERM), which the kernel would compile the same way. Every other socket option and prctl still works (libzmq sets
its own; the probe binds libzmq's pipe as ipykernel does).
"""

from __future__ import annotations

import os

import pytest
from test_redteam_round5 import _run_filter, probe_under_filter

from distlab.grading.seccomp import ATTACH_OPTIONS, seccomp_program

needs_filter = pytest.mark.skipif(not seccomp_program(), reason="no seccomp program for this machine")

PROBE = r"""
import ctypes, json, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
out = {}
# a one-instruction classic BPF program (ret 0xffff: accept) as struct sock_fprog
insn = (ctypes.c_ubyte * 8).from_buffer_copy(struct.pack("=HBBI", 0x06, 0, 0, 0xFFFF))
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(1, ctypes.addressof(insn))
a, b = socket.socketpair()  # AF_UNIX: the only family the filter opens
for name, option in (("attach_filter", 26), ("attach_reuseport_cbpf", 51)):
    rc = libc.setsockopt(a.fileno(), 1, option, ctypes.byref(prog), ctypes.sizeof(prog))
    out[name] = 0 if rc == 0 else ctypes.get_errno()
one = ctypes.c_int(1)
rc = libc.setsockopt(a.fileno(), 1, 2, ctypes.byref(one), 4)  # SO_REUSEADDR: any other option is fine
out["reuseaddr"] = 0 if rc == 0 else ctypes.get_errno()
# a seccomp program that allows everything (ret SECCOMP_RET_ALLOW), so that, installed, it changes nothing
allow = (ctypes.c_ubyte * 8).from_buffer_copy(struct.pack("=HBBI", 0x06, 0, 0, 0x7FFF0000))
allow_prog = Prog(1, ctypes.addressof(allow))
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, which an unprivileged filter needs
rc = libc.prctl(22, 2, ctypes.byref(allow_prog), 0, 0)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
out["prctl_seccomp"] = 0 if rc == 0 else ctypes.get_errno()
rc = libc.prctl(15, b"probe", 0, 0, 0)  # PR_SET_NAME: any other prctl is fine
out["prctl_name"] = 0 if rc == 0 else ctypes.get_errno()
rc = libc.syscall(317, 1, 0, ctypes.byref(allow_prog))  # seccomp(SECCOMP_SET_MODE_FILTER, 0, prog)
out["seccomp"] = 0 if rc == 0 else ctypes.get_errno()
import os, tempfile, zmq  # the kernel's own sockets: libzmq's socket options on unix sockets
pipe = zmq.Context.instance().socket(zmq.PULL)
pipe.bind("ipc://" + os.path.join(tempfile.mkdtemp(), "pipe"))
pipe.close()
print(json.dumps(out))
"""


@needs_filter
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe calls seccomp() by its x86-64 number")
def test_no_socket_filter_nor_seccomp_filter_of_the_kernels_own_can_be_installed():
    # EPERM 1, ENOSYS 38; before the fix the two attaches, prctl and seccomp() all returned 0
    assert probe_under_filter(PROBE) == {
        "attach_filter": 1,
        "attach_reuseport_cbpf": 1,
        "reuseaddr": 0,
        "prctl_seccomp": 1,
        "prctl_name": 0,
        "seccomp": 38,
    }


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 syscall numbers")
def test_the_filter_refuses_exactly_the_attaching_options():
    # the interpreter of test_redteam_round5 (independent of how seccomp_program builds its jumps)
    allow, err = 0x7FFF0000, 0x00050000
    program, arch = seccomp_program(), 0xC000003E
    for level in (0, 1, 6, 41, 0xFFFF):  # SOL_IP 0, SOL_SOCKET 1, SOL_TCP 6, SOL_IPV6 41
        for option in range(0, 80):
            want = err | 1 if level == 1 and option in ATTACH_OPTIONS else allow
            assert _run_filter(program, arch, 54, (3, level, option)) == want, (level, option)
    for option in range(0, 80):
        assert _run_filter(program, arch, 157, (option, 2, 0)) == (err | 1 if option == 22 else allow), option
    assert _run_filter(program, arch, 317, (1, 0, 0)) == err | 38
    assert _run_filter(program, arch, 0, (0, 0, 0)) == allow  # read: the blocks leave other calls alone
