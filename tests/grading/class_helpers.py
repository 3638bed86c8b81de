"""Shared by the class-grading tests: a roster, per-student notebooks, and notebooks solved with a seed's numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from distlab.lessons.variants import lesson_variant

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"instructor-secret-for-tests"


def write_roster(folder: Path, ids=("alice", "bob", "carol")) -> tuple[Path, Path]:
    roster = folder / "roster.csv"
    roster.write_text("id,email,name\n" + "".join(f"{i},{i}@uni.example,{i.title()}\n" for i in ids))
    secret = folder / "secret.key"
    secret.write_bytes(SECRET + b"\n")
    return roster, secret


def solve(path: Path, slug: str, seed: str | None, wrong: tuple = ()) -> Path:
    """Fill every answer_qN of the notebook at `path` with the expected value for `seed` (or 0 for `wrong`)."""
    nb = json.loads(path.read_text())
    questions = lesson_variant(slug, seed)
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        for name, q in questions.items():
            value = 0 if name in wrong else q.expected()
            source = re.sub(
                rf"^answer_{name} = None  # YOUR ANSWER HERE$", f"answer_{name} = {value!r}", source, flags=re.M
            )
        cell["source"] = source
    path.write_text(json.dumps(nb))
    return path
