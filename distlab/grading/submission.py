"""Reading a submitted notebook leniently: the file is never trusted, never imported or executed here.

Not valid JSON, truncated, cells without sources: each becomes a problem in the report, never a crash.
Only the sources of the code cells are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_sources(path: Path, problems: list[str]) -> tuple[Any, list[str]] | None:
    """(notebook metadata, code-cell sources) read leniently, or None when nothing is usable."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        problems.append(f"could not read the file: {exc.strerror or exc}")
        return None
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        problems.append(f"the file is not a valid notebook (not JSON: {str(exc)[:200]}); "
                        "was it truncated or edited outside Jupyter?")
        return None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        problems.append("the file is JSON but not a notebook (no list of cells)")
        return None
    sources = []
    skipped = 0
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            skipped += 1
            continue
        sources.append(source)
    if skipped:
        problems.append(f"{skipped} code cell(s) had no readable source and were skipped")
    return data.get("metadata"), sources
