"""Shared by the class-grading tests: a roster, per-student notebooks, and notebooks solved with a seed's numbers."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distlab.grading.report import NotebookGrade, QuestionGrade
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


#: the unprivileged user the container tests run the notebook as: an id no account uses, so ending "every
#: process of this user" ends only what the test started
def worker_number() -> int:
    """pytest-xdist's worker number (gw0 -> 0), 0 in a plain run."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


#: The unprivileged id the container tests run the notebook as: one per xdist worker, since run_autograder ends
#: "every process of that user" (kill -KILL -1), which would end another worker's kernel of the same id.
KERNEL_UID = 61234 + 16 * worker_number()
KERNEL_ID = f"{KERNEL_UID}:{KERNEL_UID}"


@functools.lru_cache(maxsize=1)
def unprivileged_python() -> tuple[str, str] | None:
    """(a Python with distlab's grading packages that KERNEL_ID can run, its PYTHONPATH), or None.

    None: not root, or no setpriv/unshare, or no such Python. Tried in order: $DISTLAB_TEST_UNPRIVILEGED_PYTHON;
    this interpreter; the system's python3.X of the same version with this environment's site-packages (for a
    virtual environment whose base interpreter lies in a folder only root can enter, such as pyenv's under /root).
    """
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"):
        return None
    uid, gid = KERNEL_ID.split(":")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    packages = os.pathsep.join(p for p in sys.path if p.endswith("site-packages"))
    candidates = [
        (os.environ.get("DISTLAB_TEST_UNPRIVILEGED_PYTHON"), str(ROOT)),
        (sys.executable, str(ROOT)),
        (f"/usr/bin/{version}", os.pathsep.join([str(ROOT), packages])),
        (f"/usr/local/bin/{version}", os.pathsep.join([str(ROOT), packages])),
    ]
    for python, path in candidates:
        if not python or not os.path.exists(python):
            continue
        probe = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "env", "-i", f"PYTHONPATH={path}"]
            + [python, "-c", "import distlab.grading.grade, nbclient, ipykernel, zmq"],
            capture_output=True,
            timeout=120,
        )
        if probe.returncode == 0:
            return python, path
    return None


def autograder_env(root: Path, **extra) -> dict:
    """The environment run_autograder gets in the tests: the autograder root, the Python, the kernel user."""
    python, path = unprivileged_python() or (sys.executable, str(ROOT))
    return {
        **os.environ,
        "DISTLAB_AUTOGRADER_ROOT": str(root),
        "DISTLAB_PYTHON": python,
        "DISTLAB_KERNEL_USER": KERNEL_ID,
        "PYTHONPATH": path,
        "MPLCONFIGDIR": str(root / "mpl"),
        **extra,
    }


needs_unprivileged_python = pytest.mark.skipif(
    unprivileged_python() is None,
    reason="the container mode runs the notebook as another user: needs root, setpriv and unshare, and a Python "
    "with distlab's grading packages that user can run (this one, the system's python3.X with this environment's "
    "packages, or $DISTLAB_TEST_UNPRIVILEGED_PYTHON)",
)


def stand_in_grade(path, identity=None, points: float = 0.0, unanswered: tuple = ()) -> NotebookGrade:
    """What grade_notebook returns for `path` in the class-run tests that stand it in: lesson 1's q1 with `points`
    of 1, each question of `unanswered` with none; the student is the first identity given."""
    q1 = QuestionGrade("q1", "correct" if points else "incorrect", points, 1.0, "fb", "p")
    others = [QuestionGrade(q, "incorrect", 0.0, 1.0, "fb", "p") for q in unanswered]
    return NotebookGrade(str(path), "memory_wall", [q1, *others], [], sandbox="bwrap", student=(identity or ("",))[0])
