"""Which notebook of a Gradescope upload set is graded: the lesson's, by name, found by a bounded walk (depth and
entries), so an upload's shape (deep, wide, looping) costs bounded time and memory. Used by
distlab.grading.gradescope (the generated autograder's root phase)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from .. import lessons as manifest
from .discover import canonical, lesson_from_name

__all__ = ["PICK_DEPTH", "PICK_ENTRIES", "Pick", "pick_notebook"]

#: how far pick_notebook reads an upload set: folders below its top, directory entries in all
PICK_DEPTH = 8
PICK_ENTRIES = 10_000


class Pick(NamedTuple):
    """pick_notebook's answer: the notebook to grade (None: none found), the others, and whether all was read."""

    chosen: Path | None
    ignored: list[Path]
    complete: bool


def _notebooks(root: Path) -> tuple[list[Path], bool]:
    """The .ipynb entries (not folders) under `root` and whether all of it was read: an iterative walk (os.scandir),
    shallowest first, down PICK_DEPTH folders at most, reading PICK_ENTRIES entries at most. Links are not followed
    and dot-folders not entered, so an upload's shape (deep, wide, looping) costs bounded time and memory."""
    found: list[Path] = []
    level, read = [root], 0
    for _ in range(PICK_DEPTH + 1):
        below: list[Path] = []
        for folder in level:
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        read += 1
                        if read > PICK_ENTRIES:
                            return found, False
                        if entry.name.startswith("."):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            below.append(Path(entry.path))
                        elif entry.name.lower().endswith(".ipynb"):  # 01_memory_wall.IPYNB too
                            found.append(Path(entry.path))
            except OSError:
                continue
        if not below:
            return found, True
        level = below
    return found, False  # folders deeper than PICK_DEPTH were not read


def _may_be_notebook(path: Path) -> bool:
    """Whether `path` is a regular file with something in it (lstat: a link, a FIFO, a device, a folder or an empty
    file can never be graded, and is never picked before one that may be: red team round 17 04)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size > 0


def pick_notebook(paths, lesson: str) -> Pick:
    """The one notebook to grade among the .ipynb files under `paths`, the others, and whether all was read.

    The lesson's exercise file name first (01_memory_wall.ipynb), then a name naming the lesson
    (memory_wall (1).ipynb), then any notebook; within each, the shallowest, then by name; a non-empty regular file
    always before anything else (_may_be_notebook). Only
    the first is graded: two uploaded copies of a half-solved notebook are not added up. Folders
    are read by _notebooks (bounded depth and entries).
    """
    slug = canonical(lesson)
    entry = manifest.LESSONS.get(slug)
    exercise = (entry.exercise or "") if entry is not None else ""
    found: list[Path] = []
    complete = True
    for root in map(Path, paths):
        if root.is_dir() and not root.is_symlink():
            more, whole = _notebooks(root)
            found += more
            complete = complete and whole
        else:
            found.append(root)

    def rank(nb: Path):
        tier = 0 if nb.name == exercise else 1 if lesson_from_name(nb.name) == slug else 2
        return (not _may_be_notebook(nb), tier, len(nb.parts), nb.as_posix())

    found.sort(key=rank)
    return Pick(found[0] if found else None, found[1:], complete)
