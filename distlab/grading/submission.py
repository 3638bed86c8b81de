"""Reading a submitted notebook leniently: the file is never trusted, never imported or executed here.

Not valid JSON, truncated, cells without sources: each becomes a problem in the report, never a crash.
Only the sources of the code cells are kept.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from . import beneath
from .messages import json_counts

__all__ = [
    "MAX_NOTEBOOK_BYTES",
    "MAX_NOTEBOOK_CONTAINERS",
    "MAX_NOTEBOOK_VALUES",
    "MAX_NOTEBOOK_DECODED_BYTES",
    "decoded_bytes",
    "MAX_CODE_CHARS",
    "read_submission",
    "read_sources",
    "parse_sources",
]

#: a submitted notebook larger than this is refused (the largest lesson notebook, executed with its plots, is 0.9 MB;
#: at 32 MB a 31 MB notebook took the grader to 748 MB: default/06)
MAX_NOTEBOOK_BYTES = 8 * 2**20
#: decoding a notebook of n bytes takes up to n (1 + 2 w): the file as text and its strings again, w bytes a character
#: (Python's str: 1, 2 from U+0100, 4 from U+10000 on: one emoji makes the whole text 4 bytes a character, 72 MB for
#: 8 MB). A notebook whose n (1 + 2 w) is over this is refused: 40 MB, so 8 MB of text up to U+FFFF, 4.4 MB with an
#: emoji
MAX_NOTEBOOK_DECODED_BYTES = 40 * 2**20
#: a character past U+FFFF (UTF-8's 4-byte lead, or a JSON surrogate escape), and one past U+00FF (a 2- or 3-byte
#: lead from U+0100 on, or a \u escape of one); either may over-count (an escaped backslash before "u"), never under
_ASTRAL = re.compile(rb"[\xf0-\xf4]|\\u[dD][89abAB]")
_WIDE = re.compile(rb"[\xc4-\xef]|\\u(?:0[1-9a-fA-F]|[1-9a-fA-F])")
#: a notebook holding more JSON objects and arrays than this is refused before it is decoded (the largest lesson
#: notebook holds 647; 10 million "[]" in 30 MB took the grader to 840 MB once decoded)
MAX_NOTEBOOK_CONTAINERS = 50_000
#: a notebook holding more JSON values than this (scalars and keys included) is refused before it is decoded: the
#: largest lesson notebook, executed, holds 7,800; 8.4 million "1.5" in one array (449 MB) or 6.5 million one-character
#: strings (748 MB) were one container each
MAX_NOTEBOOK_VALUES = 100_000
#: the code cells of a notebook may hold this many characters together (the lessons' code is under 100 kB; a 30 MB
#: cell is sent to the kernel and held by the grader several times over)
MAX_CODE_CHARS = 2 * 2**20


def read_submission(path: Path, problems: list[str], limit: int = MAX_NOTEBOOK_BYTES, root=None) -> bytes | None:
    """The bytes of the submitted file, read once; None (and a problem) unless it is a regular file under `limit`.

    A symbolic link (to the solutions, to /dev/zero), a FIFO, a device or a folder is refused without
    being opened: lstat first (opening a device node runs its driver: /dev/watchdog arms the host's watchdog, a tape
    rewinds, a terminal becomes the grader's; red team round 12 class/07), then opened with O_NOFOLLOW, O_NONBLOCK and
    O_NOCTTY and checked with fstat to be that same regular file. root: the folder the instructor named, below which
    no link is followed either (beneath.open_folder: each folder on the way opened with O_NOFOLLOW; red team round 26
    01, a student's folder swapped for a link after the walk); default the file's own folder.
    """
    path = Path(path)
    top = path.parent if root is None else root
    try:
        parent = beneath.open_folder(top, beneath.parts_below(path.parent, top))
    except ValueError:  # not below root: never read
        problems.append(_ON_THE_WAY)
        return None
    except OSError as exc:
        problems.append(
            _ON_THE_WAY if exc.errno in beneath.ON_THE_WAY else f"could not read the file: {exc.strerror or exc}"
        )
        return None
    try:
        return _read_in(parent, path.name, problems, limit)
    finally:
        os.close(parent)


#: the problem of a notebook whose path below the folder given holds a link (or a file) where a folder was
_ON_THE_WAY = (
    "could not read the file: a folder on its way is a symbolic link or not a folder (a link is never followed): "
    "submit the notebook file itself"
)


def _read_in(parent: int, name: str, problems: list[str], limit: int) -> bytes | None:
    """read_submission's reading of `name` in the folder open as `parent` (lstat, O_NOFOLLOW, fstat, the limit)."""
    try:
        seen = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError as exc:
        problems.append(f"could not read the file: {exc.strerror or exc}")
        return None
    if stat.S_ISLNK(seen.st_mode):
        problems.append("the file is a symbolic link, not the notebook itself: submit the notebook file")
        return None
    if not stat.S_ISREG(seen.st_mode):
        problems.append("the file is not a regular file (a folder, a device or a pipe): submit the notebook file")
        return None
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link put in its place since the lstat
            problems.append("the file is a symbolic link, not the notebook itself: submit the notebook file")
        else:
            problems.append(f"could not read the file: {exc.strerror or exc}")
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (seen.st_dev, seen.st_ino):
            problems.append("the file is not a regular file (a folder, a device or a pipe): submit the notebook file")
            return None
        if info.st_size > limit:
            problems.append(
                f"the notebook is too big to grade: the file is {info.st_size / 2**20:.1f} MB, more than the "
                f"{limit / 2**20:g} MB a notebook may have: clear its outputs (Edit > Clear Outputs of All Cells) "
                "and submit again"
            )
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while we read
            problems.append(f"the notebook is too big to grade: more than the {limit / 2**20:g} MB it may have")
            return None
        return b"".join(chunks)
    except OSError as exc:
        problems.append(f"could not read the file: {exc.strerror or exc}")
        return None
    finally:
        os.close(fd)


def _clean(text: str) -> str:
    """`text` with lone surrogates (a JSON "\\ud800" escape) replaced by U+FFFD: they cannot be sent to a kernel."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def read_sources(path: Path, problems: list[str]) -> tuple[Any, list[str]] | None:
    """(notebook metadata, code-cell sources) read leniently, or None when nothing is usable."""
    raw = read_submission(path, problems)
    return None if raw is None else parse_sources(raw, problems)


#: byte-order marks (UTF-8, UTF-32, UTF-16): json.loads would read a file starting with one in that encoding
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def decoded_bytes(raw: bytes) -> int:
    """Bytes json.loads(raw) takes at most for text: len(raw) (1 + 2 w), w the widest character's size in a Python
    str (MAX_NOTEBOOK_DECODED_BYTES); two linear regex searches."""
    width = 4 if _ASTRAL.search(raw) else 2 if _WIDE.search(raw) else 1
    return len(raw) * (1 + 2 * width)


def _too_big(raw: bytes, problems: list[str]) -> bool:
    """Refuse (a problem, True) a notebook that is not UTF-8 or would decode to too much: checked on the bytes, in
    one linear pass (messages.json_counts), before json.loads makes a single object."""
    if raw.startswith(_BOMS) or b"\x00" in raw:  # UTF-16/32 hold NUL bytes; JSON text never does
        problems.append(
            "the file is not UTF-8 text (it starts with a byte-order mark or holds NUL bytes: UTF-16 or UTF-32?); "
            "save the notebook from Jupyter, which writes UTF-8, and submit again"
        )
        return True
    counts = json_counts(raw)
    if counts.containers > MAX_NOTEBOOK_CONTAINERS or counts.values > MAX_NOTEBOOK_VALUES:
        problems.append(
            f"the notebook is too big to grade: it holds {counts.containers:,} JSON objects and lists and up to "
            f"{counts.values:,} values, more than the {MAX_NOTEBOOK_CONTAINERS:,} and {MAX_NOTEBOOK_VALUES:,} a "
            "notebook may have (the lessons' notebooks hold under 1,000 and 10,000); submit the exercise notebook "
            "itself"
        )
        return True
    decoded = decoded_bytes(raw)
    if decoded > MAX_NOTEBOOK_DECODED_BYTES:
        problems.append(
            f"the notebook is too big to grade: its text would take {decoded / 2**20:.0f} MB once decoded, more than "
            f"the {MAX_NOTEBOOK_DECODED_BYTES / 2**20:g} MB a notebook may (emoji and other characters past U+FFFF "
            "take 4 bytes each); clear its outputs (Edit > Clear Outputs of All Cells) and submit again"
        )
        return True
    return False


def parse_sources(raw: bytes, problems: list[str]) -> tuple[Any, list[str]] | None:
    """(notebook metadata, code-cell sources) from the bytes of a notebook, or None when nothing is usable.

    Bounded by construction: UTF-8 only, at most MAX_NOTEBOOK_VALUES values (_too_big) in at most
    MAX_NOTEBOOK_BYTES, so what json.loads makes is bounded whatever the file holds."""
    if _too_big(raw, problems):
        return None
    try:
        data = json.loads(raw)  # bytes, UTF-8 (_too_big): no decoded copy of the whole file is kept
    except UnicodeDecodeError:
        problems.append("the file is not UTF-8 text; save the notebook from Jupyter, which writes UTF-8")
        return None
    except (ValueError, RecursionError) as exc:
        problems.append(
            f"the file is not a valid notebook (not JSON: {str(exc)[:200]}); "
            "was it truncated or edited outside Jupyter?"
        )
        return None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        problems.append("the file is JSON but not a notebook (no list of cells)")
        return None
    sources: list[str] = []
    skipped = code = 0
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        parts = source if isinstance(source, list) else [source]
        if not all(isinstance(s, str) for s in parts):
            skipped += 1
            continue
        code += sum(map(len, parts))
        if code > MAX_CODE_CHARS:  # before the parts are joined: no further copy of a huge cell
            problems.append(
                f"the notebook is too big to grade: its code cells hold more than the {MAX_CODE_CHARS / 2**20:g} MB "
                "of text they may have together; remove what is not your answers and submit again"
            )
            return None
        sources.append(_clean("".join(parts)))
    if skipped:
        cells = "code cell had" if skipped == 1 else "code cells had"
        problems.append(f"{skipped} {cells} no readable source and {'was' if skipped == 1 else 'were'} skipped")
    return data.get("metadata"), sources
