"""The grader's private temporary folders, never left behind for long: one run folder per grading run.

A grading run (distlab.grading.classroom.grade_class, ``distlab grade``) works in one folder of its own,
``<tmp>/distlab-run-XXXXXXXX`` (mode 0700), that holds every private copy of a student's notebook (the class
runner's copies, grade_notebook's ``distlab-grade-*`` folders: tempfile's folder points there while it runs). The
run holds an exclusive lock (flock) on ``.lock`` in it; the folder is removed when the run ends, and a run that
was killed (SIGKILL, out of memory, a power cut) leaves a folder whose lock nobody holds: the next run of the same
user removes it before it starts. The student view (distlab.grading.student_view) keeps such a lock file too.
A folder whose lock is held (a run still going, another course graded at the same time) is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["RUN_PREFIX", "LOCK", "STALE_PREFIXES", "hold", "outer_temp", "remove_stale", "run_folder"]

RUN_PREFIX = "distlab-run-"
LOCK = ".lock"
#: the private folders of distlab that hold a lock while in use: removed when stale (the lock free)
STALE_PREFIXES = (RUN_PREFIX, "distlab-view-")


#: the temporary folder outside the run folders now in use (innermost last)
_OUTER: list[str] = []


def outer_temp() -> str:
    """The temporary folder outside any run folder (where what outlives a run, the student view, is made)."""
    return _OUTER[0] if _OUTER else tempfile.gettempdir()


def hold(folder: Path):
    """An open file holding an exclusive lock on folder/.lock (released when it is closed or the process dies).
    The lock is taken on a private name first and then renamed to .lock, so .lock is never seen unlocked."""
    private = Path(folder) / f"{LOCK}.{os.getpid()}"
    fd = os.open(private, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(private, Path(folder) / LOCK)
    return os.fdopen(fd, "r+")


def _remove(folder: str) -> None:
    def retry(func, path, _exc):
        try:
            os.chmod(path, 0o700)
            os.chmod(os.path.dirname(path), 0o700)
            func(path)
        except OSError:
            pass

    shutil.rmtree(folder, onerror=retry)


def remove_stale(base: str | None = None) -> list[str]:
    """Remove this user's distlab folders in `base` (default: the temporary folder) whose lock nobody holds.

    Only folders (never links) owned by this user, named with STALE_PREFIXES and holding a .lock file are
    considered; a lock that can be taken means the process that made it has ended. Returns what was removed."""
    base = base or tempfile.gettempdir()
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.name.startswith(STALE_PREFIXES) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            fd = os.open(os.path.join(entry.path, LOCK), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # no lock file (not ours, or being made), gone meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a run still going
            os.close(fd)
            continue
        try:
            _remove(entry.path)
            removed.append(entry.path)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def run_folder():
    """A private folder for one grading run (mode 0700, locked), in which tempfile makes its folders meanwhile;
    stale run folders of killed runs are removed first, and this one at the end."""
    outer = outer_temp()
    remove_stale(outer)
    folder = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=outer))
    lock = hold(folder)
    previous = tempfile.tempdir
    _OUTER.append(outer)
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = previous
        _OUTER.pop()
        _remove(str(folder))
        lock.close()
