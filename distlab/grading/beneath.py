"""Reaching what lies below a folder the instructor named without following a link on the way.

A class run lists a student's folder, then reads each notebook found, minutes later when its turn comes. A student
who can write their own folder meanwhile could put a link where a folder was: a path built from names (lstat, then
open with O_NOFOLLOW) follows a link in any part of it but the last, so the grader, often root, read through it
whatever it named (red team round 26 01: ``mallory/sub`` swapped for a link to a folder only root could read, and
the solutions notebook in it was graded as mallory's). Here every folder on the way is opened relative to the one
before it with O_NOFOLLOW | O_DIRECTORY: a link (or anything but a folder) in its place is refused by the operating
system (ENOTDIR), whatever it points to and whenever it was put there. Only the folder the instructor named is
reached by its path (links in the instructor's own path are the instructor's).
"""

from __future__ import annotations

import errno
import os

__all__ = ["FOLDER_FLAGS", "LIST_FLAGS", "parts_below", "open_folder", "ON_THE_WAY"]

#: how a folder on the way is opened: never through a link, and (O_PATH, where there is one) only to be passed,
#: so a folder that may be searched but not listed (mode 0711) is passed as a path would pass it
FOLDER_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: how the folder a walk lists is opened (below the one before it, never through a link)
LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

#: the errors open_folder gives for a link or a file where a folder was
ON_THE_WAY = (errno.ENOTDIR, errno.ELOOP)


def parts_below(path, root) -> list[str]:
    """The names leading from folder `root` down to `path` ([] for root itself); ValueError when `path` is not below
    `root` (compared as written, after os.path.abspath: no link is resolved)."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    parts = [] if rel == os.curdir else rel.split(os.sep)
    if any(p in ("", os.curdir, os.pardir) for p in parts):
        raise ValueError(f"{path} is not below {root}")
    return parts


def open_folder(root, parts=(), last: int = FOLDER_FLAGS) -> int:
    """A descriptor of the folder root/parts[0]/.../parts[-1]: `root` opened by its path, then each part relative
    to the folder before it with O_NOFOLLOW | O_DIRECTORY (OSError ENOTDIR for a link or a file in its place); the
    last one with the flags `last` (LIST_FLAGS to list it). The caller closes it."""
    parts = list(parts)
    fd = os.open(root, (FOLDER_FLAGS if parts else last) & ~os.O_NOFOLLOW)
    try:
        for n, part in enumerate(parts, 1):
            if part in ("", os.curdir, os.pardir) or os.sep in part:
                raise OSError(errno.EINVAL, f"{part!r} is not a folder's name")
            below = os.open(part, last if n == len(parts) else FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd
