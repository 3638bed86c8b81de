"""Red-team reproducers, second round of the default (bubblewrap) mode: each test asserts the secure behaviour and
FAILS while the hole exists (the attacks: issue 28's second default-mode round, NN-name as in its SUMMARY).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from distlab.grading.kernel import bwrap_available, run_in_kernel
from distlab.grading.messages import json_containers

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")


def run_bwrap(
    cells: list[str],
    base: Path,
    problems: list[str],
    timeout: float = 60,
    cell_timeout: float = 30,
    memory_limit: int = 8 * 2**30,
    audit_hook: bool = True,
):
    """The answer snapshot of `cells` (answer_x) run in one bubblewrap kernel (base: the run's private folder)."""
    (base / "submission.ipynb").write_text("{}")
    return run_in_kernel(
        cells,
        base / "work",
        answer_names=["answer_x"],
        timeout=timeout,
        cell_timeout=cell_timeout,
        sandbox="bwrap",
        memory_limit=memory_limit,
        file_size_limit=64 * 2**20,
        problems=problems,
        audit_hook=audit_hook,
    )


# 04-regex-redos-grader-hang: b'"' + b'\\"' * n made the old string regex restart at every quote and scan to the end
# (n**2 / 2 steps: 16 kB took 3.7 s, 2 MB ~18 h). Everything after the first quote is one unterminated string, so no
# bracket is outside a string: 0 containers. Run in a child with a time limit, so the old code fails, not hangs.
# Timed in the child's own CPU seconds, which the suite's load beside it does not stretch (wall time did: 0.74 s of
# a 0.5 s limit in a loaded CI run); the quadratic scan needs hours of CPU at 8 MB, linear a fraction of a second.
REDOS = r"""
import time
from distlab.grading.messages import MAX_MESSAGE_BYTES, json_containers
for raw in (b'"' + b'\\"' * (MAX_MESSAGE_BYTES // 2), b'"' + b'\\\\\\"' * (MAX_MESSAGE_BYTES // 4)):
    started = time.process_time()
    assert json_containers(raw + b"[{") == 0
    print(time.process_time() - started)
"""


def test_redteam_an_unterminated_string_of_escaped_quotes_is_counted_in_linear_time():
    try:
        done = subprocess.run([sys.executable, "-c", REDOS], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("json_containers took more than 20 s on 8 MB") from None
    assert done.returncode == 0, done.stderr
    assert all(float(s) < 2.0 for s in done.stdout.split()), done.stdout  # CPU seconds
    # escapes pair from the left as JSON reads them: '"\\\\"' is a string ending in a backslash, then one list
    assert json_containers(b'"\\\\" [') == 1
    assert json_containers(b'["\\"[", {"{": [1]}]') == 3  # the list, the object, the inner list


# 01-shell-flood-hang: a cell that never finishes sends small, correctly signed messages on the kernel's own shell
# socket; nbclient looks at a cell's deadline only when no message arrives, so neither the cell's nor the notebook's
# limit took effect (--timeout 20 ran 209 s). The loop stops itself after 150 s, so the old code fails, not hangs.
SHELL_FLOOD = r"""
import time
k = get_ipython().kernel
ident, sock, session = k._parent_ident["shell"], k.shell_stream.socket, k.session
end = time.monotonic() + 150
while time.monotonic() < end:
    try:
        session.send(sock, "comm_msg", {"data": {}}, ident=ident)
    except BaseException:
        pass
"""


@needs_bwrap
def test_redteam_a_kernel_flooding_its_shell_socket_is_killed_at_the_notebook_deadline(tmp_path):
    problems: list[str] = []
    started = time.monotonic()
    run_bwrap(["answer_x = 1", SHELL_FLOOD], tmp_path, problems, timeout=10, cell_timeout=5)
    # the hard deadline: the notebook's 10 s + HARD_DEADLINE_GRACE (20 s), plus the kernel's start and the kill (< 20 s)
    assert time.monotonic() - started < 10 + 20 + 20, problems


# the grader's own peak memory (VmHWM, MiB) and problems after grading the notebook argv[1] as `distlab grade` does
GRADE_PEAK = r"""
import json, sys
from distlab.grading import grade
result = grade.grade_notebook(sys.argv[1], lesson="memory_wall", timeout=60, cell_timeout=30)
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) // 1024
print(json.dumps({"peak": peak, "problems": result.problems, "score": result.score}))
"""


def grade_in_child(path: Path) -> dict:
    import json

    done = subprocess.run([sys.executable, "-c", GRADE_PEAK, str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@needs_bwrap
def test_redteam_a_notebook_of_ten_million_empty_lists_is_refused_as_too_big(tmp_path):
    # 06-submission-json-memory: a valid 30 MB notebook (under the 32 MB cap) whose metadata holds 10 million "[]":
    # json.loads made 10 million lists, 840 MB of grader memory (the limit: 200 MB)
    path = tmp_path / "01_memory_wall.ipynb"
    path.write_bytes(b'{"cells": [], "metadata": {"x": [' + b"[]," * 10_000_000 + b'[]]}, "nbformat": 4}')
    found = grade_in_child(path)
    assert found["peak"] < 200, found
    assert any("too big" in p for p in found["problems"]), found


@needs_bwrap
def test_redteam_a_thirty_megabyte_cell_is_refused_as_too_big(tmp_path):
    # 23-one-huge-cell: one code cell "answer_q1 = 16" + a 30 MB comment: the grader held it several times over
    # (243 MB) and the answer was lost with only "the answers could not be read"; now it is refused, and says why
    import json

    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    cell["source"] = ["answer_q1 = 16\n", "# " + "x" * 30_000_000 + "\n"]
    path = tmp_path / "01_memory_wall.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found = grade_in_child(path)
    assert found["peak"] < 200, found
    assert any("too big" in p for p in found["problems"]), found


def _as_unprivileged(function, uid: int) -> int:
    """Run function() in a forked child as user `uid` (when we are root; else as ourselves); its exit status."""
    import os

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            function()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_redteam_the_cleanup_never_follows_a_link_and_never_crashes():
    # 14-nonroot-cleanup-follows-symlink and 19-nonroot-cleanup-crash: what a kernel of a non-root grader left in
    # the run's folder: d/ (mode 0555) holding a link to a file of the grading user and a file; x/ (mode 000)
    # holding a file. shutil.rmtree's retry chmodded through the link (the victim's mode 0644 -> 0700) and called
    # os.open(p) without flags (TypeError: the grader crashed, the next notebook never graded).
    import os

    from class_helpers import KERNEL_UID
    from distlab.grading.grade import _remove_tree

    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="distlab-cleanup-", dir="/tmp"))  # reachable by the unprivileged user
    if os.geteuid() == 0:
        os.chown(folder, KERNEL_UID, KERNEL_UID)
    victim, base = folder / "victim.txt", folder / "distlab-grade-x"
    results = folder / "left.txt"

    def plant_then_remove():
        victim.write_text("mine")
        victim.chmod(0o644)
        for folder in ("d", "x"):
            (base / "ipc" / folder).mkdir(parents=True)
            (base / "ipc" / folder / "keep.bin").write_bytes(b"k" * 1000)
        (base / "ipc" / "d" / "l").symlink_to(victim)
        (base / "ipc" / "d").chmod(0o555)
        (base / "ipc" / "x").chmod(0o000)
        results.write_text(repr(_remove_tree(base)))

    try:
        assert _as_unprivileged(plant_then_remove, KERNEL_UID) == 0
        assert oct(victim.stat().st_mode & 0o777) == oct(0o644)
        assert not base.exists() and results.read_text() == "[]"
    finally:
        for path in base.rglob("*") if base.exists() else []:
            path.chmod(0o700) if path.is_dir() and not path.is_symlink() else None
        shutil.rmtree(folder)


# 21-nonroot-ptrace-bwrap-init: process 1 of the sandbox was bubblewrap's init, without the seccomp filter and (a
# grader that is not root) the kernel's own user: the kernel ptrace-attached it and made it unshare a user namespace
# (every capability there). Every process of the sandbox must carry the filter, and ptrace must be refused.
EVERY_PROCESS_FILTERED = r"""
import os
answer_x = {}
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        answer_x[pid] = status["Seccomp"].strip()
    except OSError:
        pass
try:
    open("/proc/1/mem", "rb").close()
    answer_x["mem"] = "opened"
except OSError as exc:
    answer_x["mem"] = type(exc).__name__
try:
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("long ptrace(long request, int pid, void *addr, void *data);")
    answer_x["ptrace"] = ffi.dlopen(None).ptrace(16, 1, ffi.NULL, ffi.NULL)  # PTRACE_ATTACH to process 1
    answer_x["errno"] = ffi.errno
except ImportError:
    pass
"""


@needs_bwrap
def test_redteam_every_process_of_the_sandbox_has_the_seccomp_filter_and_ptrace_is_refused(tmp_path):
    problems: list[str] = []
    found = (run_bwrap([EVERY_PROCESS_FILTERED], tmp_path, problems) or {}).get("answer_x")
    assert isinstance(found, dict) and "1" in found, (found, problems)
    assert {pid: mode for pid, mode in found.items() if pid.isdigit() and mode != "2"} == {}, found
    assert found["mem"] == "PermissionError", found  # process 1 is not dumpable: its memory is not the kernel's
    if "ptrace" in found:  # cffi installed (it raises no audit event): attaching to process 1 fails with EPERM
        assert (found["ptrace"], found["errno"]) == (-1, 1), found


# 05-nonroot-host-disk-write: base/ipc (the kernel's sockets), on the host's disk, was bound read-write into the
# sandbox and taken back only by a root grader; a non-root grader's kernel wrote 721 MB there, past the 256 MB quota.
# By construction now: every mount the kernel can write is a size-limited tmpfs of the sandbox.
WRITABLE_MOUNTS = r"""
import os
answer_x = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    mount_point, options = fields[4], fields[5].split(",")
    fstype, source_options = line.split(" - ")[1].split()[0], line.split(" - ")[1].split()[-1].split(",")
    if "rw" in options and os.path.isdir(mount_point):  # a folder: files can be made in it (not /dev/null)
        answer_x.append([mount_point, fstype, [o for o in source_options if o.startswith("size=")]])
"""


@needs_bwrap
def test_redteam_every_writable_mount_of_the_sandbox_is_a_size_limited_tmpfs(tmp_path):
    problems: list[str] = []
    found = (run_bwrap([WRITABLE_MOUNTS], tmp_path, problems) or {}).get("answer_x")
    assert isinstance(found, list) and found, (found, problems)
    found = [m for m in found if m[1] != "proc"]  # /proc: no file can be made in it
    assert [m for m in found if m[1] != "tmpfs" or not m[2]] == [], found
    assert {m[0] for m in found} <= {"/tmp", "/run/distlab/ipc"}, found


def test_redteam_a_distribution_python_does_not_bring_all_of_usr(monkeypatch):
    # 20-system-python-binds-all-usr: with a virtual environment of Debian's /usr/bin/python3, sys.base_prefix is
    # /usr and the whole of it was bound "as the runtime": a course folder under /usr/local/share was readable.
    # Only the runtime's own files may be bound: the interpreter, its standard library, what this process mapped.
    from distlab.grading import sandbox

    monkeypatch.setattr(sys, "base_prefix", "/usr")
    monkeypatch.setattr(sys, "base_exec_prefix", "/usr")
    monkeypatch.setattr(sys, "_base_executable", "/usr/bin/python3", raising=False)
    args = sandbox._runtime_binds()
    sources = [args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--bind")]
    for secret in ("/usr/local/share/course/course.key", "/usr/src/checkout/tests", "/usr/share/doc/x"):
        assert [s for s in sources if secret.startswith(s.rstrip("/") + "/")] == [], (secret, sources)


# the grader's own peak memory (VmHWM, MiB) after running the cells argv[1:] in one bubblewrap kernel
KERNEL_PEAK = r"""
import shutil, sys, tempfile
from pathlib import Path
from distlab.grading.kernel import run_in_kernel
base = Path(tempfile.mkdtemp(prefix="distlab-redteam-"))
(base / "submission.ipynb").write_text("{}")
problems = []
try:
    snapshot = run_in_kernel(sys.argv[1:], base / "work", answer_names=["answer_x"], timeout=120, cell_timeout=60,
                             sandbox="bwrap", memory_limit=8 * 2**30, file_size_limit=64 * 2**20, problems=problems)
finally:
    shutil.rmtree(base, ignore_errors=True)
print(problems, snapshot)
print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) // 1024)
"""

# 02-multipart-frames-memory and 26-many-tiny-frames: one iopub message of 60 extra frames of 7 MB (each under zmq's
# 8 MB MAXMSGSIZE, which bounds a frame, not a message) or of 3 million 1-byte frames: libzmq receives a multipart
# message whole before its first frame can be read; the grader reached 527 MB and 325 MB (the limit: 200 MB)
BIG_FRAMES = r"""
k = get_ipython().kernel
k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": "hi"}, parent=k.get_parent("shell"),
               buffers=[b"x" * (7 * 2**20)] * 60)
"""
TINY_FRAMES = BIG_FRAMES.replace('[b"x" * (7 * 2**20)] * 60', '[b"x"] * 3_000_000')


@needs_bwrap
@pytest.mark.parametrize("flood", [BIG_FRAMES, TINY_FRAMES], ids=["60-frames-of-7MB", "3M-frames-of-1B"])
def test_redteam_one_message_of_many_frames_does_not_reach_the_grader(flood):
    done = subprocess.run(
        [sys.executable, "-c", KERNEL_PEAK, flood + "\nanswer_x = 1", "answer_x = 2"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) < 200, done.stdout


def test_redteam_a_non_root_kernel_may_add_only_its_own_processes(tmp_path):
    # 24-nonroot-nproc-userns: a non-root grader's kernel runs in bubblewrap's user namespace, where Linux >= 5.14
    # counts RLIMIT_NPROC from 0 (per namespace and user); the limit was 256 + every task the user already ran
    # (606 + 256), so the kernel forked 850 children. There the limit must be the 256 alone. (The live attack needs a
    # non-root grader: re-run /work/redteam/default/24-nonroot-nproc-userns; it forked 244 of 900 after this fix.)
    from distlab.grading import sandbox

    import platform
    import re

    release = re.match(r"(\d+)\.(\d+)", platform.release())
    if release is None or (int(release[1]), int(release[2])) < (5, 14):
        pytest.skip("Linux < 5.14 counts every task of the user: the grader's are added there, as documented")
    world = sandbox.SandboxWorld(tmp_path, kernel_uid=0)
    prefix = sandbox.starter_prefix(world, 2**30, 256, 2**26, 100)
    limits = prefix[prefix.index(sandbox.STARTER) + 2 : prefix.index(sandbox.STARTER) + 6]
    assert limits == [str(2**30), "256", str(2**26), "100"], limits


# 04-regex-redos-grader-hang, end to end: the 2 MB unterminated string as a stream message's content. Once the count
# was linear, its decoding raised JSONDecodeError through nbclient and the whole notebook "could not be run" (the
# answer set before it lost): a part that is not JSON is dropped like any other the grader does not read.
UNTERMINATED_STREAM = r"""
k = get_ipython().kernel
k.session.send(k.iopub_socket, "stream", b'"' + b'\\"' * 10**6, parent=k.get_parent("shell"))
"""


@needs_bwrap
def test_redteam_a_stream_message_that_is_not_json_is_dropped(tmp_path):
    problems: list[str] = []
    started = time.monotonic()
    snapshot = run_bwrap(["answer_x = 16", UNTERMINATED_STREAM, "answer_x = 17"], tmp_path, problems, timeout=60)
    assert (snapshot or {}).get("answer_x") == 17 and problems == [], (snapshot, problems)
    assert time.monotonic() - started < 60


@needs_bwrap
def test_an_exception_too_large_to_send_is_reported_as_such_not_as_a_loop(tmp_path):
    # a 7 MB exception is sent twice (the error on iopub, the execute_reply on shell: evalue and traceback), over the
    # relay's MAX_RELAYED_BYTES, so both are dropped and the cell waits for its time limit; the student was told
    # "was interrupted (an infinite loop?)". The grading must go on to the next cell either way. (30 s: IPython takes
    # seconds to format a 7 MB traceback on a loaded machine; a cell stopped before that is a real time-out, and the
    # kernel, still formatting, then misses the interrupt's deadline. 15 s failed once in CI on a machine running the
    # benchmarks' reference work at 64 ms, 2.2 times its recorded 27-31 ms, with 3 workers on 2 cores.)
    problems: list[str] = []
    snapshot = run_bwrap(
        ['raise ValueError("x" * 7_000_000)', "answer_x = 2"], tmp_path, problems, timeout=90, cell_timeout=30
    )
    assert snapshot is not None and snapshot["answer_x"] == 2, (snapshot, problems)
    text = " ".join(problems)
    assert "infinite loop" not in text, problems
    assert "larger than the grader accepts" in text, problems
