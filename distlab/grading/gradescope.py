"""The Gradescope autograder package: one zip that Gradescope's containers build and run for each submission.

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) unzips the package
into ``/autograder/source``, runs ``setup.sh`` once when it builds the image, then for every
submission runs ``run_autograder`` with the student's files in ``/autograder/submission`` and
reads ``/autograder/results/results.json``. Ours installs distlab (bundled from this source tree,
or a pip requirement) and calls ``distlab grade --container`` on the submission, with the
submitter from ``/autograder/submission_metadata.json`` and, for per-student variants, the
roster and the instructor secret packed in the zip (students never see the autograder's
files). If grading fails the script still writes a results.json that says so.

For tests the paths come from environment variables: DISTLAB_AUTOGRADER_ROOT (default
/autograder), DISTLAB_AUTOGRADER_SOURCE (default $ROOT/source) and DISTLAB_PYTHON (the Python
with distlab, default the virtual environment setup.sh makes).
"""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path

from .. import lessons as manifest
from ..errors import ConfigurationError

__all__ = ["VENV", "RUNTIME", "FALLBACK", "project_root", "setup_script", "run_script", "build_autograder"]

VENV = "/opt/distlab-venv"
RUNTIME = ("nbclient", "nbformat", "ipykernel")
FALLBACK = (
    '{"score": 0, "output": "The autograder could not grade this submission. Upload the exercise notebook '
    '(.ipynb) of this lesson; if it was, tell your instructor (the log has the reason).", "tests": []}'
)


def project_root() -> Path | None:
    """The source tree distlab runs from (the folder with its pyproject.toml), or None for an installed copy."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "distlab"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def setup_script(requirement: str) -> str:
    """setup.sh: Python, a virtual environment, distlab and the kernel machinery."""
    return f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-pip python3-venv > /dev/null
python3 -m venv {VENV}
{VENV}/bin/pip install --quiet --upgrade pip
{VENV}/bin/pip install --quiet {requirement} {" ".join(RUNTIME)}
{VENV}/bin/python -m distlab grade --help > /dev/null
"""


def run_script(lesson: str, timeout: float, cell_timeout: float, variants: bool) -> str:
    """run_autograder: grade /autograder/submission into /autograder/results/results.json (paths overridable)."""
    args = [
        "grade",
        "--container",
        "--quiet",
        "--lesson",
        lesson,
        "--timeout",
        f"{timeout:g}",
        "--cell-timeout",
        f"{cell_timeout:g}",
    ]
    variant_args = '\nargs+=(--roster "$SOURCE/roster.csv" --secret-file "$SOURCE/variant_secret")' if variants else ""
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission; it must leave results/results.json behind.
set -uo pipefail
ROOT="${{DISTLAB_AUTOGRADER_ROOT:-/autograder}}"
SOURCE="${{DISTLAB_AUTOGRADER_SOURCE:-$ROOT/source}}"
PYTHON="${{DISTLAB_PYTHON:-{VENV}/bin/python}}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
args=({" ".join(shlex.quote(a) for a in args)} --gradescope "$RESULTS")
if [ -f "$ROOT/submission_metadata.json" ]; then
  args+=(--submission-metadata "$ROOT/submission_metadata.json")
fi{variant_args}
"$PYTHON" -m distlab "${{args[@]}}" "$ROOT/submission"
status=$?
if [ ! -s "$RESULTS" ]; then
  echo "distlab grade exited with status $status and wrote no results" >&2
  printf '%s\\n' {shlex.quote(FALLBACK)} > "$RESULTS"
fi
exit 0
"""


def _add_tree(zf: zipfile.ZipFile, root: Path, prefix: str) -> None:
    for path in sorted((root / "distlab").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            zf.write(path, f"{prefix}/{path.relative_to(root).as_posix()}")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (root / name).is_file():
            zf.write(root / name, f"{prefix}/{name}")


def build_autograder(
    lesson: str,
    out,
    *,
    requirement: str | None = None,
    roster=None,
    secret_file=None,
    timeout: float = 300.0,
    cell_timeout: float = 60.0,
) -> Path:
    """Write the Gradescope autograder zip for `lesson` to `out`; returns its path.

    requirement: what setup.sh pip-installs (default: this source tree, bundled in the zip).
    roster and secret_file: per-student variants (both, or neither).
    """
    try:
        slug = manifest.lesson(lesson).slug
    except KeyError:
        raise ConfigurationError(f"no lesson {lesson!r}; lessons: {', '.join(manifest.graded())}") from None
    if slug not in manifest.graded():
        raise ConfigurationError(f"lesson {slug!r} has no graded questions")
    if bool(roster) != bool(secret_file):
        raise ConfigurationError("per-student variants need both --roster and --secret-file")
    root = project_root()
    if requirement is None and root is None:
        raise ConfigurationError(
            "distlab is not running from its source tree: pass --pip SPEC (what setup.sh "
            "installs, e.g. a wheel URL or 'distlab==0.1.0')"
        )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:

        def script(name: str, text: str) -> None:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16
            zf.writestr(info, text)

        script("setup.sh", setup_script(requirement or "/autograder/source/distlab-src"))
        script("run_autograder", run_script(slug, timeout, cell_timeout, bool(roster)))
        if requirement is None and root is not None:  # root is found: checked above
            _add_tree(zf, root, "distlab-src")
        if roster:
            zf.write(roster, "roster.csv")
            zf.write(secret_file, "variant_secret")
    return out
