"""The kernel outside bubblewrap ("container", "trusted"): its environment (an allow-list, never the grader's) and,
in the generated Gradescope autograder, the unprivileged user it runs as (distlab.grading.kernel starts it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["kernel_env", "container_kernel_ids", "runtime_packages"]


def kernel_env(work: Path) -> dict:
    """The kernel's environment outside bubblewrap ("container", "trusted"): an allow-list, never the grader's.

    Its temporary, IPython and matplotlib folders lie inside the working copy; the student view of
    distlab comes first on its path (the answer key is not imported into the kernel).
    """
    from .student_view import student_view

    return {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.defpath,
        "HOME": str(work),
        "LANG": "C.UTF-8",
        "TMPDIR": str(work / ".tmp"),
        "IPYTHONDIR": str(work / ".ipython"),
        "MPLCONFIGDIR": str(work / ".matplotlib"),
        "MPLBACKEND": "agg",
        "PYTHONPATH": os.pathsep.join([str(student_view()), *_package_folders()]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }


def _package_folders() -> list[str]:
    """The site-packages folders the grader was given on its PYTHONPATH (a system Python running an environment's
    packages): the kernel needs them too. Never any other folder of it (a checkout holds the answer key)."""
    given = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return [p for p in given if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]


def container_kernel_ids() -> tuple[int, int] | None:
    """(uid, gid) the kernel runs as in container mode, from $DISTLAB_KERNEL_IDS ("uid:gid", set by the generated
    run_autograder when it runs the grader as root), or None: the kernel stays the grader's user.

    Root (uid or gid 0) is refused; so is a grader that is not root (it could not switch users).
    """
    text = os.environ.get("DISTLAB_KERNEL_IDS", "")
    if not text:
        return None
    uid, _, gid = text.partition(":")
    if not (uid.isdigit() and gid.isdigit()) or int(uid) == 0 or int(gid) == 0 or os.geteuid() != 0:
        raise RuntimeError(f"DISTLAB_KERNEL_IDS must be uid:gid of an unprivileged user, set by root, not {text!r}")
    return int(uid), int(gid)


def runtime_packages() -> list[str]:
    """The grader's site-packages folders (the kernel's runtime: ipykernel, numpy...), for a kernel of another user.

    The distlab package in them (the answer key) is root's alone in the container (setup.sh makes it mode 0700);
    the kernel imports the student view, which comes first on its path.
    """
    return [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]


def _chown(path: Path, ids: tuple[int, int]) -> None:
    os.chown(path, *ids, follow_symlinks=False)


def _hand_to_kernel_user(base: Path, work: Path, uid: int, gid: int) -> Path:
    """Give the kernel's user its working copy and a folder for its sockets; returns the connection file's path.

    base (the grader's private folder) becomes traversable, not listable; base/ipc and the copy are the user's.
    """
    os.chmod(base, 0o711)
    ipc = base / "ipc"
    ipc.mkdir(mode=0o700)
    for path in [ipc, work, *work.rglob("*")]:
        os.chown(path, uid, gid, follow_symlinks=False)
    return ipc / "kernel.json"
