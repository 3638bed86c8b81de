"""Red team round 13: `distlab grade` run by an ordinary (non-root) user, as most instructors run it. The kernel then
runs as the grader's own user id (in bubblewrap's user namespace), so whatever Linux counts per real user id, across
every namespace, the kernel shares with the grader and with all the user's other work.

- 01-epoll-watches: `fs.epoll.max_user_watches` (4% of the machine's memory, in watches) is counted per real user id,
  in the user's `user_struct`, whatever the user namespace. A kernel that keeps E epoll instances and F eventfds and
  registers each file under K dup'd descriptor numbers (closing the dups: a watch lives as long as its file) holds
  E x F x K watches per process with 256 descriptors (80 x 80 x 90 = 576,000); 10 forked processes took all 5,491,511
  of a 23 GB machine in seconds (1.1 GB of slab no rlimit counts). Every other process of the grader's user then got
  ENOSPC from epoll_ctl, and once the kernel cut its end of its connections, the grader's libzmq reconnected, its
  I/O thread's epoll_ctl failed and libzmq's errno_assert aborted the grader (SIGABRT, "No space left on device
  (src/epoll.cpp:73)"): no report (4 of 8 runs, one with `--out`; the others, a class folder's among them, ended
  normally, the watches full all the same). Not fixed: no rlimit, seccomp
  rule or namespace bounds a user's epoll watches; only a kernel of another user id (a root grader's) is counted apart.
  Documented in the threat model; no test here: a non-root grader needs a Python that user can run, and CI's lies
  under /root, which no other user enters (a system Python with this environment's packages on PYTHONPATH cannot
  grade in bubblewrap mode: the sandbox binds the environment's site-packages, not PYTHONPATH's folders).
- 03-pipe-pages: `fs.pipe-user-pages-soft` (16,384 pages) is counted per real user id too. 16 forked processes of 120
  pipes each (16 pages a pipe) passed it, and while the notebook ran every new pipe of every other process of the
  grader's user had 8 kB instead of 64 kB and could not be grown (F_SETPIPE_SZ: EPERM). Not fixed, for the same
  reason; the hard limit (`fs.pipe-user-pages-hard`) is 0 by default, so the pages themselves are bounded only by the
  kernel's 256 descriptors a process. Documented, not tested, as 01.
- 06-grade-folder-left: `distlab grade NOTEBOOK` (no `--out`) made each notebook's private folder (distlab-grade-*, a
  copy of the submission) in the temporary folder itself: the graders 01 aborted left theirs for good. Fixed: the
  run's folders lie in one locked run folder (scratch.run_folder), as a class run's, which the next run removes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from class_helpers import ROOT

EXERCISE = ROOT / "exercises" / "01_memory_wall.ipynb"


def test_a_killed_single_notebook_grader_leaves_no_copy_of_the_submission_behind():
    # 06-grade-folder-left: `distlab grade NOTEBOOK` (no --out) made its private folder (distlab-grade-*: the copy of
    # the submission, the socket folders) straight in the temporary folder, outside any locked run folder: a grader
    # that died (01-epoll-watches: libzmq's abort; SIGKILL, out of memory) left it there for good, and no later run
    # removed it. Now in a run folder (scratch.run_folder), as a class run's: the next run removes it.
    import signal
    import time

    temp = Path(tempfile.mkdtemp(prefix="rt13-", dir="/tmp"))  # short: the kernel's socket paths fit under it
    try:
        notebook = json.loads(EXERCISE.read_text())
        code = "import time\ntime.sleep(120)"
        notebook["cells"].insert(2, {"cell_type": "code", "metadata": {}, "outputs": [], "source": code})
        slow, plain = temp / "slow" / "01_memory_wall.ipynb", temp / "plain" / "01_memory_wall.ipynb"
        for path, content in ((slow, json.dumps(notebook)), (plain, EXERCISE.read_text())):
            path.parent.mkdir()
            path.write_text(content)
        env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "distlab", "grade", "--trusted", "--lesson", "memory_wall"]
        grader = subprocess.Popen([*command, str(slow)], env=env, start_new_session=True, stdout=subprocess.DEVNULL)
        try:
            until = time.monotonic() + 60
            while not list(temp.rglob("distlab-grade-*/submission.ipynb")) and time.monotonic() < until:
                time.sleep(0.2)
            assert list(temp.rglob("distlab-grade-*/submission.ipynb")), "the grader made no private folder"
            time.sleep(2)
        finally:
            os.killpg(grader.pid, signal.SIGKILL)
            grader.wait()
        done = subprocess.run([*command, str(plain)], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert list(temp.rglob("distlab-grade-*")) == [], sorted(temp.rglob("*"))
    finally:
        shutil.rmtree(temp, ignore_errors=True)
