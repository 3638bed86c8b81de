"""The Gradescope autograder package: one zip that Gradescope's containers build and run for each submission.

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) unzips the package
into ``/autograder/source``, runs ``setup.sh`` once when it builds the image, then for every
submission runs ``run_autograder`` with the student's files in ``/autograder/submission`` and
reads ``/autograder/results/results.json``. Ours installs distlab (bundled from this source tree,
or a pip requirement) and calls ``distlab grade --container`` on the submission, with the
submitter from ``/autograder/submission_metadata.json`` and, for per-student variants, the
roster and the instructor secret packed in the zip. If grading fails the script still writes a
results.json that says so.

Container mode, in two phases (the boundary is a user id and namespaces, not a list of forbidden things):

1. Root, given no roster and no secret, runs ``distlab grade --container --answers-out`` with
   DISTLAB_KERNEL_IDS set: the grader stays root and starts only the notebook's kernel as the
   unprivileged user ``distlab-kernel`` (setup.sh creates it; ``setpriv``, no groups, no new
   privileges, an environment built from nothing, the student view of distlab on its path; setup.sh
   makes the installed distlab package, the answer key, root's alone). The kernel's user can neither
   signal the grader nor read ``/autograder/source`` (the roster, the secret, the autograder),
   ``submission_metadata.json`` or anything root keeps, nor write ``/autograder/results``. The phase
   runs under ``timeout -s KILL`` in new pid, mount and network namespaces where the container
   permits them (``unshare``; where it does not, the log says so): size- and inode-limited private
   tmpfs on /tmp, /var/tmp and /dev/shm, every other file system read-only, a private IPC namespace,
   and every process of the notebook is killed when the grader ends (where there is no IPC
   namespace, the user's System V IPC objects are removed after).
   The answers are written, as plain data, to a file root opened; what the kernel's user left
   running or in the temporary folders is then removed.
2. As root: ``distlab grade --container --answers-from`` reads those answers (untrusted data,
   decoded by distlab.grading.answers.decode as the kernel's own, at most 16 MB), checks them
   against the student's variant (roster, secret, the submitter from the metadata) and writes
   results.json.

Root's Python never has a folder the upload controls on its path: both phases run it isolated (``python -I``,
see BOOT) from ``/``, with a fixed PATH, and name root's copy of the upload only as an argument.

Exactly one notebook is graded per submission (pick_notebook: the lesson's, by name; the others
are listed and ignored), so a score never exceeds the lesson's maximum. Root copies at most
PICK_COPIES notebooks of the upload (the lesson's first, PICK_DEPTH folders deep at most) and
pick_notebook's walk is bounded too, so an upload's size or shape cannot crash or stall the run.

For tests the paths come from environment variables: DISTLAB_AUTOGRADER_ROOT (default
/autograder), DISTLAB_AUTOGRADER_SOURCE (default $ROOT/source), DISTLAB_PYTHON (the Python
with distlab, default the virtual environment setup.sh makes) and DISTLAB_KERNEL_USER (a user
name, or ``uid:gid``; default distlab-kernel).
"""

from __future__ import annotations

import json
import os
import shlex
import zipfile
from pathlib import Path

from .. import lessons as manifest
from ..errors import ConfigurationError
from .answers import MAX_ANSWER_VALUES, OpaqueAnswer, decode_answers
from .messages import json_counts
from .discover import canonical
from .report import MAX_PROBLEMS, PROBLEM_CHARS, excerpt
from .sandbox import DEFAULT_INODES, IPC_LIMITS
from .upload import PICK_DEPTH, PICK_ENTRIES, Pick, pick_notebook  # still importable from here

__all__ = [
    "VENV",
    "KERNEL_USER",
    "MAX_ANSWERS_BYTES",
    "RUNTIME",
    "FALLBACK",
    "project_root",
    "lock_answer_key",
    "setup_script",
    "run_script",
    "build_autograder",
    "pick_notebook",
    "PICK_DEPTH",
    "PICK_ENTRIES",
    "Pick",
    "encode",
    "AnswerRecorder",
    "AnswerReader",
]

VENV = "/opt/distlab-venv"
#: the unprivileged user the student's notebook runs as in the container
KERNEL_USER = "distlab-kernel"
#: the most the unprivileged phase may hand to the grader, bytes
MAX_ANSWERS_BYTES = 16 * 2**20
#: the JSON values answers.json may hold (counted before it is decoded): 5 per decoded value ({"t": .., "v": ..}),
#: MAX_ANSWER_VALUES for each of 16 answers (the lessons ask fewer questions), and the problems; a file of
#: millions of bare numbers is never decoded (~30 MB at most, each value a Python object)
MAX_ANSWERS_VALUES = 5 * MAX_ANSWER_VALUES * 16 + 10_000
#: how many notebooks of an upload set root copies for grading (the lesson's by name first, then the shallowest)
PICK_COPIES = 100
#: the size of each private temporary folder (/tmp, /var/tmp, /dev/shm) of the notebook's run (tmpfs)
TMP_SIZE = "512m"
#: and its inodes (each costs kernel memory no size limit counts), as bubblewrap's private /tmp
TMP_INODES = DEFAULT_INODES
RUNTIME = ("nbclient", "nbformat", "ipykernel")
#: how root's Python starts distlab in run_autograder: `python -I -c BOOT PYTHONPATH ARGS...` (isolated, so no folder
#: the upload controls is ever on its path; the given PYTHONPATH's absolute folders first, as -I ignores it)
BOOT = (
    "import runpy, sys; sys.path[:0] = [p for p in sys.argv.pop(1).split(':') if p.startswith('/')]; "
    "runpy.run_module('distlab', run_name='__main__', alter_sys=True)"
)
FALLBACK = (
    '{"score": 0, "output": "The autograder could not grade this submission. Upload the exercise notebook '
    '(.ipynb) of this lesson; if it was, tell your instructor (the log has the reason).", "tests": [], '
    '"stdout_visibility": "hidden"}'
)


def project_root() -> Path | None:
    """The source tree distlab runs from (the folder with its pyproject.toml), or None for an installed copy."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "distlab"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def lock_answer_key(venv: str) -> str:
    """The shell line (in setup.sh) that makes the distlab package installed in `venv` root's alone (mode 0700).

    The grader (root) imports it; the kernel's user cannot read it, so not the lessons' answer key either:
    the kernel imports the student view the grader builds.
    """
    python = shlex.quote(f"{venv}/bin/python")
    return f"chmod 700 \"$({python} -I -c 'import distlab, os; print(os.path.dirname(distlab.__file__))')\""


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
{VENV}/bin/python -I -m distlab grade --help > /dev/null
# the student's notebook runs as this user: no home, no login, no group of root's
id -u {KERNEL_USER} > /dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin {KERNEL_USER}
command -v setpriv > /dev/null && command -v unshare > /dev/null && command -v timeout > /dev/null
# the answer key (the installed distlab) is root's alone: the kernel imports the student view the grader builds
{lock_answer_key(VENV)}
# the autograder's files (the roster, the secret) are root's alone
chmod -R go-rwx /autograder/source
"""


def run_script(lesson: str, timeout: float, cell_timeout: float, variants: bool) -> str:
    """run_autograder: grade /autograder/submission into /autograder/results/results.json (paths overridable).

    The notebook runs as an unprivileged user without network; root checks its answers (see the module docstring).
    """
    common = [
        "grade",
        "--container",
        "--quiet",
        "--one-notebook",
        "--lesson",
        lesson,
        "--timeout",
        f"{timeout:g}",
        "--cell-timeout",
        f"{cell_timeout:g}",
    ]
    phase1_limit = int(timeout) + 180  # the notebook's time, the kernel's start (120 s) and a margin
    return _script_start(common) + _copy_upload(lesson) + _phase_one(phase1_limit) + _phase_two(variants)


def _script_start(common: list[str]) -> str:
    """run_autograder's start: its paths, the fallback result, the kernel's user (never root), root's private copy
    of the upload, and the arguments both phases share (`common`)."""
    return f"""#!/usr/bin/env bash
# Gradescope runs this as root for every submission; it must leave results/results.json behind.
set -uo pipefail
ROOT="${{DISTLAB_AUTOGRADER_ROOT:-/autograder}}"
SOURCE="${{DISTLAB_AUTOGRADER_SOURCE:-$ROOT/source}}"
PYTHON="${{DISTLAB_PYTHON:-{VENV}/bin/python}}"
KERNEL_USER="${{DISTLAB_KERNEL_USER:-{KERNEL_USER}}}"
ROOT=$(realpath -m -- "$ROOT") SOURCE=$(realpath -m -- "$SOURCE")
RESULTS="$ROOT/results/results.json"
FALLBACK={shlex.quote(FALLBACK)}
umask 077
# nothing of the upload is ever on a path: commands from the system's folders only, and from / (the upload's copy
# is an argument, never the current folder)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cd / || exit 1
# root's Python runs isolated (-I: neither the current folder, the script's, the user's site-packages nor any PYTHON*
# variable reaches its path); the instructor's PYTHONPATH (absolute folders only) is put in front of it by hand
BOOT={shlex.quote(BOOT)}
mkdir -p "$ROOT/results"
chmod 755 "$ROOT/results"
rm -f "$RESULTS"
fail() {{
  echo "$1" >&2
  printf '%s\\n' "$FALLBACK" > "$RESULTS"
  exit 0
}}
# the roster, the secret and the submitter are root's alone
chmod -R go-rwx "$SOURCE" 2> /dev/null
[ -f "$ROOT/submission_metadata.json" ] && chmod go-rwx "$ROOT/submission_metadata.json"
if [[ "$KERNEL_USER" =~ ^[0-9]+:[0-9]+$ ]]; then
  KUID="${{KERNEL_USER%%:*}}" KGID="${{KERNEL_USER##*:}}"
else
  KUID=$(id -u "$KERNEL_USER" 2> /dev/null) && KGID=$(id -g "$KERNEL_USER" 2> /dev/null) ||
    fail "no user $KERNEL_USER to run the notebook as (setup.sh creates it); nothing was run as root"
fi
[ "$KUID" != 0 ] && [ "$KGID" != 0 ] || fail "refusing to run the notebook as root or in root's group"
PRIVATE=$(mktemp -d "$ROOT/.distlab.XXXXXX") || fail "no private folder"
trap 'rm -rf "$PRIVATE"' EXIT
common=({" ".join(shlex.quote(a) for a in common)})
"""


def _copy_upload(lesson: str) -> str:
    """Root's own copy of the upload's notebooks, bounded whatever its shape: at most PICK_COPIES of them (the
    lesson's exercise file name first, then names naming the lesson, then the shallowest), PICK_DEPTH folders deep
    at most, no dot-folder; files and links only (a link stays a link: refused when graded)."""
    entry = manifest.LESSONS.get(canonical(lesson))
    exercise = shlex.quote((entry.exercise or "") if entry is not None else "")
    named = shlex.quote(f"*{canonical(lesson)}*.ipynb")
    return f"""# root's own copy of the upload's notebooks (at most {PICK_COPIES}, the lesson's by name first): an upload's size
# and shape (300,000 files, a folder 1,200 deep) cost little; pick_notebook then reads only this copy
mkdir "$PRIVATE/submission" || fail "no private folder"
(cd "$ROOT/submission" && find . -mindepth 1 -maxdepth {PICK_DEPTH + 1} -name '.*' -prune -o \\( -type f -o -type l \\) \\
  \\( -name {exercise} -printf '0 %d %p\\0' -o -iname {named} -printf '1 %d %p\\0' -o -iname '*.ipynb' -printf '2 %d %p\\0' \\) |
  sort -z -k1,1n -k2,2n | head -z -n {PICK_COPIES} | cut -z -d ' ' -f 3- | xargs -0 -r cp -P --parents -t "$PRIVATE/submission") 2> /dev/null
"""


def _phase_one_isolation() -> str:
    """Phase 1's namespaces: those the container allows (unshare), each refused one said in the log."""
    return """# phase 1: the grader (root, no roster, no secret) runs the notebook's kernel as the unprivileged user, in new
# pid, mount, IPC and network namespaces: every file system read-only but size- and inode-limited private /tmp,
# /var/tmp, /dev/shm; and when the namespace's first process ends (the grader is done, or the time is up) every
# process in it is killed and its System V IPC objects vanish
ISOLATE=(unshare --pid --fork --kill-child --mount --mount-proc --propagation private)
PRIVATE_MOUNTS=1 PRIVATE_IPC=1
if ! "${ISOLATE[@]}" true 2> /dev/null; then
  ISOLATE=() PRIVATE_MOUNTS=
  echo "note: this container does not allow new pid and mount namespaces (unshare); the notebook can write its world-writable folders (what it leaves there is deleted after)" >&2
fi
if unshare --ipc true 2> /dev/null; then
  ISOLATE=("${ISOLATE[@]:-unshare}" --ipc)
else
  PRIVATE_IPC=
  echo "note: this container does not allow a new IPC namespace (unshare --ipc); the notebook's System V IPC objects are removed after" >&2
fi
if unshare --net true 2> /dev/null; then
  ISOLATE=("${ISOLATE[@]:-unshare}" --net)
else
  echo "note: this container does not allow a new network namespace (unshare --net); the notebook runs with its network" >&2
fi
"""


def _phase_one_script() -> str:
    """Phase 1's script inside the namespaces (PHASE1): read-only file systems, private /dev, /run and temporary
    folders, the IPC limits, then the grader in an environment built from nothing."""
    return f"""PHASE1='
UPLOAD="$1" && shift && cd / || exit 1
exec 3< "$UPLOAD" || exit 1  # held open: reached below even where /tmp is mounted over it
# every folder the grader'"'"'s Python imports from (its path files included), not only $PYTHON and $PYTHONPATH
USED=":$PYTHON:${{PYTHONPATH:-}}:$("$PYTHON" -I -c "import sys; print(chr(58).join(sys.path))" 2> /dev/null):"
SHARED=:
for d in /tmp /var/tmp /dev/shm; do
  case "$USED" in *:"$d"/*)
    echo "note: $d stays shared: the grader'"'"'s Python lies in it (what the notebook leaves there is deleted after)" >&2
    [ -n "$PRIVATE_MOUNTS" ] && {{ mount --bind "$d" "$d" || exit 1; }}  # its own mount: stays writable below
    SHARED="$SHARED$d:" ;;
  esac
done
if [ -n "$PRIVATE_MOUNTS" ]; then  # every file system read-only: no world-writable folder (/run/lock...) is left
  while read -r _ mnt _; do
    mnt=$(printf "%b" "$mnt")
    case "$mnt" in /proc | /proc/*) continue ;; esac
    case "$SHARED" in *:"$mnt":*) continue ;; esac
    mount -o remount,bind,ro "$mnt" 2> /dev/null || echo "note: $mnt stays writable (not made read-only)" >&2
  done < /proc/self/mounts
fi
if [ -n "$PRIVATE_MOUNTS" ]; then  # a private /dev without terminals (the host'"'"'s ptys are one pool), empty /run
  exec 4<> /dev/null 5<> /dev/zero 6<> /dev/full 7< /dev/random 8< /dev/urandom || exit 1
  case "$SHARED" in *:/dev/shm:*) exec 9< /dev/shm || exit 1 ;; esac
  mount -t tmpfs -o size=64k,nr_inodes=64,mode=755,nosuid,nodev,noexec tmpfs /dev || exit 1
  for dev in 4:null 5:zero 6:full 7:random 8:urandom; do
    : > "/dev/${{dev#*:}}" && mount --bind "/proc/self/fd/${{dev%%:*}}" "/dev/${{dev#*:}}" || exit 1
  done
  ln -s /proc/self/fd /dev/fd && ln -s fd/0 /dev/stdin && ln -s fd/1 /dev/stdout && ln -s fd/2 /dev/stderr || exit 1
  mkdir /dev/shm && case "$SHARED" in *:/dev/shm:*) mount --bind /proc/self/fd/9 /dev/shm || exit 1 ;; esac
  exec 4>&- 5>&- 6>&- 7<&- 8<&- 9<&-
  mount -o remount,bind,ro /dev || exit 1
  for d in /run /var/run; do
    [ -d "$d" ] && [ ! -L "$d" ] || continue
    mount -t tmpfs -o ro,size=4k,nr_inodes=16,mode=755,nosuid,nodev,noexec tmpfs "$d" || exit 1
  done
fi
for d in /tmp /var/tmp /dev/shm; do
  case "$SHARED" in *:"$d":*) continue ;; esac
  [ -n "$PRIVATE_MOUNTS" ] && [ -d "$d" ] || continue
  mount -t tmpfs -o size={TMP_SIZE},nr_inodes={TMP_INODES},mode=1777,nosuid,nodev tmpfs "$d" || exit 1
  case "$UPLOAD" in "$d"/*)  # root'"'"'s copy of the upload lay under it: reached through the open folder
    mkdir -m 700 "$d/.upload" && mount --bind /proc/self/fd/3 "$d/.upload" && UPLOAD="$d/.upload" || exit 1 ;;
  esac
done
exec 3<&-
if [ -n "$PRIVATE_IPC" ]; then  # the private IPC namespace'"'"'s limits, root'"'"'s to set before the kernel runs
  for item in $IPC_LIMITS; do
    value=${{item#*=}} && printf "%s" "${{value//:/ }}" > "/proc/sys/${{item%%=*}}" ||
      echo "note: the IPC limit ${{item%%=*}} could not be set" >&2
  done
fi
exec env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp TMPDIR=/tmp MPLBACKEND=agg \\
  DISTLAB_KERNEL_IDS="$KUID:$KGID" ${{PYTHONPATH:+PYTHONPATH="$PYTHONPATH"}} \\
  "$PYTHON" -I -c "$BOOT" "${{PYTHONPATH:-}}" "$@" "$UPLOAD"'
"""


def _phase_one(limit: int) -> str:
    """Phase 1: the notebook runs as the unprivileged user in new pid, mount, IPC and network namespaces (where the
    container allows them), killed after `limit` seconds; then whatever that user left is killed and deleted.
    With private mounts, /dev is a private minimal one (null, zero, full, random, urandom: no terminal, since every
    pty is drawn from one host-wide pool, container/06) and /run, /var/run are empty (the host's path sockets there
    are unreachable: container/19); with a private IPC namespace, its limits are IPC_LIMITS (container/11)."""
    ipc = " ".join(f"{name}={value.replace(' ', ':')}" for name, value in IPC_LIMITS)
    return (
        _phase_one_isolation()
        + _phase_one_script()
        + f"""PRIVATE_MOUNTS="$PRIVATE_MOUNTS" PRIVATE_IPC="$PRIVATE_IPC" IPC_LIMITS={shlex.quote(ipc)} KUID="$KUID" KGID="$KGID" PYTHON="$PYTHON" BOOT="$BOOT" \\
  timeout -s KILL {limit} "${{ISOLATE[@]}}" bash -c "$PHASE1" phase1 \\
  "$PRIVATE/submission" "${{common[@]}}" --answers-out - > "$PRIVATE/answers.json" 2> "$PRIVATE/phase1.log"
head -c 4000 "$PRIVATE/phase1.log" >&2  # the grader's own messages (the log is the instructor's)
# whatever that user left running ends now, and whatever it left where it could write
setpriv --reuid="$KUID" --regid="$KGID" --clear-groups kill -KILL -1 2> /dev/null
if [ -n "$PRIVATE_MOUNTS" ]; then
  find /tmp /var/tmp /dev/shm -xdev -user "$KUID" -delete 2> /dev/null  # the shared ones (see above)
else  # no namespaces: every file system it could write (kernel ones aside), each searched once
  awk '$3 !~ /^(proc|sysfs|cgroup2?|devpts|securityfs|debugfs|tracefs|bpf|pstore|fusectl|configfs|binfmt_misc|autofs)$/ {{print $2}}' \\
    /proc/self/mounts | while read -r mnt; do
    find "$(printf "%b" "$mnt")" -xdev -user "$KUID" -delete 2> /dev/null
  done
fi
if [ -z "$PRIVATE_IPC" ]; then  # its System V shared memory, message queues and semaphores
  for kind in shm:-m msg:-q sem:-s; do
    awk -v uid="$KUID" 'NR == 1 {{for (i = 1; i <= NF; i++) col[$i] = i; next}} $col["uid"] == uid || $col["cuid"] == uid {{print $2}}' \\
      "/proc/sysvipc/${{kind%%:*}}" 2> /dev/null | while read -r id; do
      setpriv --reuid="$KUID" --regid="$KGID" --clear-groups ipcrm "${{kind#*:}}" "$id" 2> /dev/null  # as its owner
    done
  done
fi
"""
    )


def _phase_two(variants: bool) -> str:
    """Phase 2, root: check the answers phase 1 wrote (with the roster and the secret when `variants`)."""
    variant_args = '\nargs+=(--roster "$SOURCE/roster.csv" --secret-file "$SOURCE/variant_secret")' if variants else ""
    return f"""# phase 2, root: check the answers against the student's own numbers
args=("${{common[@]}}" --answers-from "$PRIVATE/answers.json" --gradescope "$RESULTS")
if [ -f "$ROOT/submission_metadata.json" ]; then
  args+=(--submission-metadata "$ROOT/submission_metadata.json")
fi{variant_args}
env -u DISTLAB_VARIANT_SECRET -u DISTLAB_KERNEL_IDS "$PYTHON" -I -c "$BOOT" "${{PYTHONPATH:-}}" "${{args[@]}}" \\
  "$PRIVATE/submission"
status=$?
if [ ! -s "$RESULTS" ]; then
  fail "distlab grade exited with status $status and wrote no results"
fi
exit 0
"""


def encode(value, depth: int = 0):
    """The JSON form (distlab.grading.answers.decode's input) of an answer as decode gave it: decode(encode(a)) == a."""
    if depth > 8:
        return {"t": "opaque", "type": "object"}
    if value is None:
        return {"t": "none"}
    if value is Ellipsis:
        return {"t": "ellipsis"}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": str(value)}
    if isinstance(value, float):
        return {"t": "float", "v": repr(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, (list, tuple, set, frozenset)):
        kind = {tuple: "tuple", set: "set", frozenset: "frozenset"}.get(type(value), "list")
        return {"t": "seq", "kind": kind, "v": [encode(x, depth + 1) for x in value]}
    if isinstance(value, dict):
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in value.items()]}
    if isinstance(value, OpaqueAnswer):
        return {"t": "opaque", "type": value.type_name}
    if type(value).__name__ == "ndarray":
        return {"t": "ndarray", "dtype": str(value.dtype), "v": encode(value.tolist(), depth + 1)}
    return {"t": "opaque", "type": type(value).__name__}


class AnswerRecorder:
    """grade_notebook's run= for the unprivileged phase: runs the kernel, keeps the answers and problems to write."""

    def __init__(self):
        self.answers: dict | None = None
        self.problems: list[str] = []

    def __call__(self, raw, sources, questions, problems, **options):
        from .grade import run_notebook

        before = len(problems)
        answers = run_notebook(raw, sources, questions, problems, **options)
        self.answers, self.problems = answers, list(problems[before:])  # what the run said, not the choice of lesson
        return answers

    def write(self, path) -> None:
        data = {
            "answers": None if self.answers is None else {k: encode(v) for k, v in self.answers.items()},
            "problems": self.problems[:MAX_PROBLEMS],
        }
        text = json.dumps(data, ensure_ascii=True)
        if str(path) == "-":  # the pipe to root's phase
            import sys

            sys.stdout.write(text)
            sys.stdout.flush()
            return
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


class AnswerReader:
    """grade_notebook's run= for root's phase: the answers the unprivileged phase wrote, read as untrusted data.

    At most MAX_ANSWERS_BYTES are read, without following a link; only the lesson's answer names
    are kept, each decoded as the kernel's own output is; its problems are kept as short excerpts.
    """

    def __init__(self, path):
        self.path = Path(path)

    def _load(self):
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                raw = f.read(MAX_ANSWERS_BYTES + 1)[:MAX_ANSWERS_BYTES]
            if json_counts(raw).values > MAX_ANSWERS_VALUES:  # counted before a single object is made
                return None
            data = json.loads(raw)
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def __call__(self, raw, sources, questions, problems, **options):
        from .answers import ANSWER_PREFIX

        data = self._load()
        if data is None:
            problems.append("no answers came back from the notebook's run (it ended without writing them)")
            return {}
        found = data.get("problems")
        for p in found[:MAX_PROBLEMS] if isinstance(found, list) else []:
            problems.append(excerpt(p, PROBLEM_CHARS))
        answers = data.get("answers")
        if not isinstance(answers, dict):
            problems.append("no answers could be read from the kernel")
            return {}
        names = {f"{ANSWER_PREFIX}{q}" for q in questions}
        return decode_answers(answers, names)


def _data_files(root: Path) -> list[str]:
    """The files pyproject.toml's [tool.setuptools.data-files] installs (pip fails when one is missing)."""
    import tomllib

    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    data = config.get("tool", {}).get("setuptools", {}).get("data-files", {})
    return sorted({str(f) for files in data.values() for f in files})


def _add_tree(zf: zipfile.ZipFile, root: Path, prefix: str) -> None:
    """The source tree pip installs in setup.sh: the package, pyproject.toml and every data file it names."""
    for path in sorted((root / "distlab").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            zf.write(path, f"{prefix}/{path.relative_to(root).as_posix()}")
    for name in _data_files(root):
        zf.write(root / name, f"{prefix}/{name}")
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
