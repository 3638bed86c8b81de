"""Red team round 29: the output folder's lock, `distlab exercises --variants` over a class, checks kept busy in C code,
and the scheduler, timers and message queues of a bubblewrap kernel. Each test keeps the attack and what must hold.

01-who-holds-the-lock (succeeded, fixed): a process that inherited the output folder's lock (forked by a run that was
then killed) kept every later run out, and the refusal said only "another distlab grade is writing": the instructor
could not tell which process to end. Now the refusal names the process holding the locked open file, as Linux says in
/proc/<pid>/fdinfo (journal.lock_holders), its command name escaped; never the pid /proc/locks keeps (the one that
took the lock, which may be gone and its number reused).
02-one-students-folder-stops-the-class (succeeded, fixed): with variants folders handed out in place, a student who
put a link (or a file) where their folder was, or whose folder could not be written, made `distlab exercises
--variants` stop at them: every student after them in the roster got no notebook, and an error of the file system
(EACCES, ENOSPC) ended it with a traceback. Now every other student's notebook is written, then one message names
each folder that could not be (variants.build_variants).
03-checks-busy-in-c (held): answers forged to keep a check inside C code past its 10 s signal limit (a 4,299-digit
int, 23 of them whose product a ranks question writes, 2,000 ints of one hash in a set or a dict, 10,000 digits as
text, a 4,000-entry array) are each checked in well under a second by every graded lesson: the decoder's bounds
(4,096 values, 100,000 characters, ints under 4,300 digits, arrays under 1 MB) keep every check small.
04-scheduler-timers-queues (held, one real bubblewrap kernel, root grader, no audit hook): real-time scheduling,
a negative nice value, real-time I/O priority and a lower OOM score are refused (RLIMIT_RTPRIO and RLIMIT_NICE are 0,
no capability); POSIX timers (not descriptors: the 256-file limit does not count them) stop at the kernel user's
RLIMIT_SIGPENDING (EAGAIN) and POSIX message queues at its RLIMIT_MSGQUEUE (EMFILE).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from class_helpers import ROOT, SECRET
from distlab.errors import ConfigurationError
from distlab.grading import answers, discover, journal, variants
from distlab.grading.grade import grade_notebook

# ---- 01: who holds the lock --------------------------------------------------------------------------------------------


def test_the_refusal_names_the_process_holding_the_lock(tmp_path, monkeypatch):
    """01: a child forked while the lock was held keeps it after its parent's run ended; the refusal names the child
    (its pid, its command name escaped: the child set it to a terminal sequence), never the parent that took it. Only
    the fdinfo of the child's descriptor of the lock is read (never, say, an epoll descriptor's, which lists every
    watch)."""
    read: list[str] = []
    monkeypatch.setattr(journal, "open", lambda p, *a, **k: (read.append(str(p)), open(p, *a, **k))[1], raising=False)
    out = tmp_path / "g"
    out.mkdir()
    ready_r, ready_w = os.pipe()
    with journal.writing(out):
        child = os.fork()
        if child == 0:  # the stale holder: inherits the locked descriptor (flock locks belong to the open file)
            with open("/proc/self/comm", "w") as f:
                f.write("\x1b[2Jrun")
            os.write(ready_w, b"x")
            time.sleep(30)
            os._exit(0)
    os.read(ready_r, 1)
    os.close(ready_r)
    os.close(ready_w)
    try:
        with pytest.raises(ConfigurationError) as refused:
            with journal.writing(out):
                pass
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    message = str(refused.value)
    assert "another distlab grade is writing" in message, message
    assert f"process {child} (\\x1b[2Jrun) holds it" in message and f"kill {child})" in message, message
    assert "\x1b" not in message and str(os.getpid()) not in message, message
    assert [p for p in read if "/fdinfo/" in p] == [p for p in read if p.startswith(f"/proc/{child}/fdinfo/")], read
    assert len([p for p in read if "/fdinfo/" in p]) == 1, read
    with journal.writing(out):  # gone with its holder
        pass


def test_no_holder_is_named_where_none_can_be_known(tmp_path):
    """01: lock_holders of a file nobody locks is [] (and the refusal then reads as before)."""
    path = tmp_path / "f"
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert journal.lock_holders(fd) == []
    finally:
        os.close(fd)


# ---- 02: one student's folder stops the class ------------------------------------------------------------------------


def _roster(*ids: str) -> variants.Roster:
    return variants.Roster({i: {"id": i} for i in ids}, SECRET)


def test_a_link_in_one_students_place_leaves_the_others_notebooks_written(tmp_path):
    """02: mallory (first in the roster) put a link where her folder was: bob and carol still get theirs, and the
    message names mallory's folder; nothing is written where the link points."""
    out = tmp_path / "variants"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "mallory").symlink_to(elsewhere)
    with pytest.raises(ConfigurationError, match=r"wrote 2 notebooks, but 1 could not be written: .*mallory"):
        variants.build_variants(_roster("mallory", "bob", "carol"), ROOT / "exercises", out, ["memory_wall"])
    assert list(elsewhere.iterdir()) == []
    for sid in ("bob", "carol"):
        written = json.loads((out / sid / "01_memory_wall.ipynb").read_text())
        assert written["metadata"]["distlab"]["variant"]["student"] == sid


def test_a_folder_that_cannot_be_written_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    """02: an error of the file system in one student's folder (EACCES where the instructor is not root, ENOSPC) is
    said with the folder, and the next student's notebook is written."""
    real_replace = os.replace

    def replace(src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        if dst_dir_fd is not None and os.readlink(f"/proc/self/fd/{dst_dir_fd}").endswith("/mallory"):
            raise PermissionError(13, "Permission denied")
        return real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "replace", replace)
    out = tmp_path / "variants"
    with pytest.raises(ConfigurationError, match=r"mallory/01_memory_wall.ipynb: Permission denied"):
        variants.build_variants(_roster("mallory", "bob"), ROOT / "exercises", out, ["memory_wall"])
    assert (out / "bob" / "01_memory_wall.ipynb").is_file()
    assert os.listdir(out / "mallory") == []  # no temporary file left behind


# ---- 03: checks kept busy in C code ------------------------------------------------------------------------------------

_BIG = "9" * 4299
_M61 = (1 << 61) - 1  # ints n * (2**61 - 1) all hash to 0


def _int(v) -> dict:
    return {"t": "int", "v": str(v)}


_FORGED = {
    "a 4,299-digit int": _int(_BIG),
    "23 of them (their product)": {"t": "seq", "kind": "list", "v": [_int(_BIG)] * 23},
    "a set of one hash": {"t": "seq", "kind": "set", "v": [_int(i * _M61) for i in range(2000)]},
    "a dict of one hash": {"t": "dict", "v": [[_int(i * _M61), _int(1)] for i in range(2000)]},
    "10,000 digits as text": {"t": "str", "v": "9" * 10_000},
    "a 4,000-entry column": {
        "t": "ndarray",
        "dtype": "int64",
        "v": {"t": "seq", "kind": "list", "v": [{"t": "seq", "v": [_int(i)]} for i in range(4000)]},
    },
}


def test_forged_answers_keep_no_check_busy():
    """03 (held): every graded lesson checks each forged answer in under a second (the signal limit is 10 s)."""
    slow = []
    for lesson in discover.lessons():
        questions = discover.lesson_questions(lesson)
        for what, entry in _FORGED.items():
            decoded = {f"answer_{q}": answers.decode(entry) for q in questions}
            started = time.monotonic()
            grades = answers.check_answers(questions, decoded)
            took = time.monotonic() - started
            if took > 1.0:
                slow.append((lesson, what, round(took, 2)))
            assert all(g.points < g.max_points for g in grades), (lesson, what)
    assert not slow, slow


# ---- 04: scheduler, timers and message queues in a real bubblewrap kernel ---------------------------------------------

_PRIORITIES = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = []
def attempt(name, call):
    try:
        result = call()
    except OSError as exc:
        found.append(f"{name}=errno{exc.errno}")
    else:
        found.append(f"{name}=ok{result}")
attempt("fifo", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
attempt("nice", lambda: os.setpriority(os.PRIO_PROCESS, 0, -5))
def ioprio():  # ioprio_set(IOPRIO_WHO_PROCESS, self, IOPRIO_CLASS_RT)
    if libc.syscall(251 if os.uname().machine == "x86_64" else 30, 1, 0, 1 << 13) != 0:
        raise OSError(ctypes.get_errno(), "ioprio_set")
attempt("ioprio", ioprio)
def oom():
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
attempt("oom", oom)
raise RuntimeError("PRIORITIES " + " ".join(found))
"""

_TIMERS = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
event = (ctypes.c_char * 64)()
event[12] = 1  # sigev_notify = SIGEV_NONE
made, handle, errno = 0, ctypes.c_void_p(), 0
while made < 400_000:
    if libc.timer_create(1, event, ctypes.byref(handle)) != 0:
        errno = ctypes.get_errno()
        break
    made += 1
raise RuntimeError(f"TIMERS {made} errno{errno}")
"""

_QUEUES = r"""
import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
attr = (ctypes.c_long * 8)(0, 10, 8192, 0)
made, errno = 0, 0
while made < 1000:
    if rt.mq_open(f"/q{made}".encode(), os.O_CREAT | os.O_RDWR, 0o600, attr) < 0:
        errno = ctypes.get_errno()
        break
    made += 1
raise RuntimeError(f"QUEUES {made} errno{errno}")
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/bwrap"), reason="a root grader, bwrap")
def test_no_priority_and_bounded_timers_and_queues_in_the_sandbox(tmp_path):
    """04 (held): one kernel (the audit hook off, so ctypes reaches the system calls) tries each."""
    cells = [_PRIORITIES, _TIMERS, _QUEUES]
    nb = {
        "cells": [
            {"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": None} for s in cells
        ],
        "metadata": {"distlab": {"lesson": "memory_wall"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = Path(tmp_path / "01_memory_wall.ipynb")
    path.write_text(json.dumps(nb))
    grade = grade_notebook(path, lesson="memory_wall", timeout=90, cell_timeout=40, _audit_hook=False)
    problems = "\n".join(grade.problems)
    assert "PRIORITIES fifo=errno1 nice=errno13 ioprio=errno1 oom=errno13" in problems, problems
    timers = problems.split("TIMERS ", 1)[1].split()
    assert int(timers[0]) < 400_000 and timers[1] == "errno11", problems  # RLIMIT_SIGPENDING: EAGAIN
    queues = problems.split("QUEUES ", 1)[1].split()
    assert int(queues[0]) < 1000 and queues[1] == "errno24", problems  # RLIMIT_MSGQUEUE: EMFILE
