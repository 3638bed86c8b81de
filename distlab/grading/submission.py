"""Reading a submitted notebook leniently: the file is never trusted, never imported or executed here.

Not valid JSON, truncated, cells without sources: each becomes a problem in the report, never a crash.
Only the sources of the code cells are kept.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .messages import json_containers

__all__ = [
    "MAX_NOTEBOOK_BYTES",
    "MAX_NOTEBOOK_CONTAINERS",
    "MAX_CODE_CHARS",
    "read_submission",
    "read_sources",
    "parse_sources",
]

#: a submitted notebook larger than this is refused (exercise notebooks with their plots are a few MB)
MAX_NOTEBOOK_BYTES = 32 * 2**20
#: a notebook holding more JSON objects and arrays than this is refused before it is decoded (the largest lesson
#: notebook holds 647; 10 million "[]" in 30 MB took the grader to 840 MB once decoded)
MAX_NOTEBOOK_CONTAINERS = 50_000
#: the code cells of a notebook may hold this many characters together (the lessons' code is under 100 kB; a 30 MB
#: cell is sent to the kernel and held by the grader several times over)
MAX_CODE_CHARS = 2 * 2**20


def read_submission(path: Path, problems: list[str], limit: int = MAX_NOTEBOOK_BYTES) -> bytes | None:
    """The bytes of the submitted file, read once; None (and a problem) unless it is a regular file under `limit`.

    A symbolic link (to the solutions, to /dev/zero), a FIFO, a device or a folder is refused without
    being read: opened with O_NOFOLLOW and O_NONBLOCK, then checked with fstat.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if os.path.islink(path):
            problems.append("the file is a symbolic link, not the notebook itself: submit the notebook file")
        else:
            problems.append(f"could not read the file: {exc.strerror or exc}")
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            problems.append("the file is not a regular file (a folder, a device or a pipe): submit the notebook file")
            return None
        if info.st_size > limit:
            problems.append(
                f"the file is {info.st_size / 2**20:.1f} MB, more than the {limit / 2**20:g} MB a "
                "notebook may have: clear its outputs (Edit > Clear Outputs of All Cells) and submit again"
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
            problems.append(f"the file is more than the {limit / 2**20:g} MB a notebook may have")
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


def parse_sources(raw: bytes, problems: list[str]) -> tuple[Any, list[str]] | None:
    """(notebook metadata, code-cell sources) from the bytes of a notebook, or None when nothing is usable."""
    containers = json_containers(raw)
    if containers > MAX_NOTEBOOK_CONTAINERS:
        problems.append(
            f"the notebook is too big to grade: it holds {containers:,} JSON objects and lists, more than the "
            f"{MAX_NOTEBOOK_CONTAINERS:,} a notebook may have (the lessons' notebooks hold under 1,000); submit the "
            "exercise notebook itself"
        )
        return None
    try:
        try:
            data = json.loads(raw)  # bytes: no decoded copy of the whole file
        except UnicodeDecodeError:
            data = json.loads(raw.decode("utf-8", errors="replace"))
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
        problems.append(f"{skipped} code cell(s) had no readable source and were skipped")
    return data.get("metadata"), sources
