"""Autograding of exercise notebooks: run the student's notebook, read the answers, check them here.

    from distlab.grading import grade
    report = grade.grade_notebooks(["submission.ipynb"], timeout=120)
    print(report.table())
    report.to_json()          # {"score": .., "max_score": .., "questions": [..], "notebooks": [..]}
    report.to_gradescope()    # Gradescope's results.json

How a notebook is graded
------------------------
1. The file is read leniently (not valid JSON, truncated, cells without sources, outputs
   that do not validate: each becomes a "problem" in the report, never a crash). Only the
   sources of its code cells are kept, in a fresh notebook, copied into a new temporary
   working folder.
2. The lesson is found from the notebook metadata ``metadata["distlab"]["lesson"]``, else
   from the file name (``01_memory_wall.ipynb`` -> ``memory_wall``), else from the
   ``distlab.lessons.<lesson>`` module its cells import (see distlab.grading.discover).
   Lessons come from the manifest ``distlab.lessons.LESSONS``; older lesson names still
   identify their lesson. With ``lesson=`` given, a notebook that belongs to another lesson
   gets no points and says so.
3. A fresh kernel of this Python environment (nbclient) starts with the temporary folder as
   working directory. A first, private cell installs the sandbox (below) and must report
   back before any student code runs (distlab.grading.kernel_side, sent as its source). Then every code cell runs in order, errors allowed
   (one bad cell does not stop the rest), each cell with a time limit and the whole notebook
   with a total time limit; a cell that runs too long is interrupted.
4. After every cell a private cell serialises the lesson's answer variables (``answer_q1``,
   ``answer_q2``, ...; each within an equal share of the output kept) to JSON, as plain data
   only (numbers, strings, quantities as text, containers; any other object arrives as its type
   name), between two markers carrying a random nonce. The nonce is not secret (an IPython hook
   can read the private cell), but whatever a student prints there is only values, which the
   real checks still judge: the same as setting the variables. The grading process parses the last snapshot it could get (so answers given before an
   infinite loop or a crash still count) and calls the REAL checks of
   ``distlab.lessons.<lesson>.QUESTIONS`` here, in the grading process. A notebook that
   redefines or monkeypatches ``q1.check`` only changes its own kernel. Answers are read
   from the namespace, so reordered cells are fine; a missing cell leaves its question
   "not attempted".

The sandbox, and what it does not do
------------------------------------
Untrusted notebooks are graded only inside an operating-system sandbox:

* **bubblewrap** (``sandbox="auto"``/``"bwrap"``, the default; refused, not weakened, where the
  ``bwrap`` program cannot run): the kernel's world is built by allow-list (sandbox.bwrap_prefix).
  Nothing of the host exists in it but, read-only, the Python runtime's own files (never its whole prefix), the
  system libraries, fonts, the environment's site-packages (a virtual environment's own folder,
  never the checkout around it) and the **student view** of distlab (student_view: the lessons'
  questions as stubs, the grader left out); writable, a private ``/tmp`` of 256 MB (tmpfs: the
  working copy and every temporary file share it; nothing reaches the host's disk) and a 64 kB
  tmpfs for its unix sockets (the grader reaches them through /proc and a bounded relay, relay.py);
  process 1 is the starter (seccomp-filtered, not dumpable); ``/dev`` minimal, ``/proc`` of its own process
  namespace. Home folders, ``/etc``, the checkout, ``tests/``, ``solutions/``, ``.git``, course
  folders, rosters and keys give "no such file" whatever path, descriptor or C call is used.
  Private process, IPC, host-name, cgroup and **network** namespaces (the grader talks to the kernel
  over those unix sockets, jupyter's "ipc" transport); a new session; it dies with the grader; an
  environment from an allow-list (never the grader's: no ``DISTLAB_VARIANT_SECRET``). A grader
  running as root starts the kernel as a fresh unprivileged user id of its own (so the process limit
  holds, and every capability is gone); a grader that is not root runs it as itself, with no cgroup
  (``distlab grade`` refuses that unless ``--rlimits-only`` is given: the memory of all of the kernel's
  processes together is then not capped; this function does not refuse).
* ``sandbox="container"`` (``--container``): the caller says it already runs in a throw-away
  container (Gradescope); no bubblewrap, everything else below.
* ``sandbox="trusted"`` (``--trusted``; ``"audit"`` is its old name): the audit hook only, for
  notebooks you trust; the report says ``trusted`` and warns.

Always: resource limits on every kernel, set before it starts (address space, processes and
threads, file size, CPU seconds); the kernel and its whole process group are killed as soon as
its notebook is done, or (a watchdog outside the message loop) 20 s after its time limit whatever
it sends; what a cell prints is capped in the kernel, any message over 8 MB (a printed text over 1 MB) is dropped unread, the grader keeps at most 2 MB of a notebook's output and drops each cell's
output once its errors and answers are read; the submitted file is read once and must be a regular file (no symbolic
link, FIFO or device) of at most 8 MB (UTF-8), 50,000 JSON objects and arrays, 100,000 JSON values and 2 MB of code; the checks run here under a time limit.

**The answer key never enters the kernel**: the expected values are computed only here. In every
mode the kernel imports the student view of distlab (distlab.grading.student_view), whose lesson
modules hold question stubs (prompt, hint, params, unit, options; check() says the grader checks,
solution() is withheld) and no code that computes an expected value, an explanation or feedback.
(distlab's formula modules stay importable: using them is what the lessons teach.) Outside
bubblewrap the real package still lies on the disk; the audit hook refuses reading it.

**A Python audit hook** (always, installed before any student code; a second layer: under
bubblewrap nothing depends on it) refuses writes, deletions,
renames, links and permission changes outside the working copy (symlinks and ``..``
resolved with C functions bound at install time; relative write paths with ``..`` and new
symbolic links refused, since the ``open`` event carries no ``dir_fd``), unix sockets bound
outside, SQLite connections, process creation, signals to other processes, ``ctypes``,
``sys.settrace``/``setprofile``, ``resource.setrlimit``, re-importing ``posix``, ``os``,
``signal`` or ``readline`` (whose ``mkfifo``, ``mknod``, ``pidfd_open``,
``pidfd_send_signal`` and history-file writers, which raise no audit event, are removed), and
changing its own functions. It is **not an operating-system sandbox**: C extensions act
without events, a second thread can race a check, and reading files and burning CPU until the
limits are not prevented; hence ``--trusted`` only for trusted work. The grading process
itself only reads the submitted file as JSON and never imports, executes or unpickles anything
from it.
"""

from __future__ import annotations

import math
import os
import stat
import tempfile
import time
from pathlib import Path

from ..errors import ConfigurationError
from .answers import ANSWER_PREFIX, check_answers, not_attempted
from .beneath import LIST_FLAGS
from .discover import canonical, identify_lesson, lesson_from_name, lesson_questions
from .kernel import bwrap_available, run_in_kernel
from .report import GradeReport, NotebookGrade
from .submission import parse_sources, read_submission

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_CELL_TIMEOUT",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_FILE_SIZE_LIMIT",
    "DEFAULT_PROCESS_LIMIT",
    "SANDBOXES",
    "MAX_TIMEOUT",
    "NO_SANDBOX",
    "check_limits",
    "grade_notebook",
    "grade_notebooks",
    "run_notebook",
]

DEFAULT_TIMEOUT = 300.0
DEFAULT_CELL_TIMEOUT = 60.0
DEFAULT_MEMORY_LIMIT = 8 * 2**30  # address space of the kernel, bytes
DEFAULT_FILE_SIZE_LIMIT = 64 * 2**20  # largest file the kernel may write, bytes
DEFAULT_PROCESS_LIMIT = 256  # processes and threads a kernel may add
#: "auto" and "bwrap": bubblewrap (refused where it cannot run); "container": the caller says it runs in a
#: throw-away container (Gradescope); "trusted": the audit hook only, for notebooks you trust ("audit": old name)
SANDBOXES = ("auto", "bwrap", "container", "trusted", "audit")
#: the longest time limit accepted, seconds (a day)
MAX_TIMEOUT = 86_400.0
NO_SANDBOX = (
    "bubblewrap is not installed or cannot run here, and untrusted notebooks are graded only inside an "
    "operating-system sandbox: install it (apt-get install bubblewrap), or say that this already runs "
    "in a throw-away container (--container, sandbox='container'), or that you trust these notebooks "
    "(--trusted, sandbox='trusted': the Python audit hook only, which a determined student can escape)"
)


def _sandbox(sandbox: str) -> str:
    """ "bwrap", "container" or "trusted": what `sandbox` means here; refuses when bubblewrap is needed and missing."""
    if sandbox not in SANDBOXES:
        raise ConfigurationError(f"sandbox={sandbox!r}; valid: {', '.join(SANDBOXES)}")
    if sandbox == "audit":
        return "trusted"
    if sandbox in ("auto", "bwrap") and not bwrap_available():
        raise ConfigurationError(NO_SANDBOX)
    return "bwrap" if sandbox == "auto" else sandbox


def _check_number(name: str, value, low: float, high: float, allow_none: bool = False) -> None:
    """Refuse a limit that is not a finite number in [low, high] (NaN and inf included)."""
    if value is None and allow_none:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ConfigurationError(f"{name}={value!r}: give a finite number from {low:g} to {high:g}")


def check_limits(timeout, cell_timeout, memory_limit=None, file_size_limit=None, process_limit=None) -> None:
    """Validate the grading limits (seconds, bytes, count); ConfigurationError names the bad one."""
    _check_number("timeout", timeout, 1, MAX_TIMEOUT)
    _check_number("cell_timeout", cell_timeout, 1, MAX_TIMEOUT)
    _check_number("memory_limit", memory_limit, 2**28, 2**44, allow_none=True)
    _check_number("file_size_limit", file_size_limit, 2**16, 2**40, allow_none=True)
    _check_number("process_limit", process_limit, 16, 100_000, allow_none=True)


def _unreadable(grade: NotebookGrade, path: Path, questions: dict | None) -> None:
    """A file that could not be read: every question not attempted, when the lesson is known."""
    if questions is None:
        found = lesson_from_name(path.name)
        if found:
            try:
                questions, grade.lesson, grade.lesson_from = lesson_questions(found), found, "file name"
            except ConfigurationError:
                pass
    if questions is not None:
        grade.questions = not_attempted(questions, "not attempted (the notebook could not be read)")


def _choose_questions(grade: NotebookGrade, found: str | None, how: str, questions: dict | None) -> dict | None:
    """The questions to grade against, or None (with the reason in grade.problems, and zeros if due)."""
    if questions is not None:  # --lesson given
        if found is not None and found != grade.lesson:
            grade.problems.append(
                f"this notebook belongs to lesson {found!r} (from its {how}), not to "
                f"{grade.lesson!r}: it was not graded; submit the exercise notebook of this lesson"
            )
            grade.questions = not_attempted(questions, f"not attempted (the notebook submitted is lesson {found!r})")
            return None
        return questions
    if found is None:
        grade.problems.append(
            "cannot tell which lesson this notebook belongs to (no distlab lesson in its metadata, "
            "file name or imports); grade it with --lesson NAME"
        )
        return None
    try:
        questions = lesson_questions(found)
    except ConfigurationError as exc:
        grade.problems.append(f"the notebook names lesson {found!r} (from its {how}), but {exc}")
        return None
    grade.lesson, grade.lesson_from = found, how
    return questions


#: folders deeper than this below a run's private folder are not entered by _remove_tree (reported instead)
_MAX_DEPTH = 256


def _make_ours(parent: int, name: str) -> None:
    """chmod 0700 the folder `name` in `parent` without following a link (Linux: an O_PATH descriptor of it)."""
    if not hasattr(os, "O_PATH"):  # no O_PATH (not Linux): by name, just after lstat said it is a folder
        os.chmod(name, 0o700, dir_fd=parent)
        return
    handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=parent)
    try:
        if not stat.S_ISDIR(os.fstat(handle).st_mode):
            raise OSError("changed while it was removed")
        os.chmod(f"/proc/self/fd/{handle}", 0o700)
    finally:
        os.close(handle)


def _remove_entry(parent: int, name: str, depth: int, left: list[str]) -> None:
    """Remove `name` in the folder open as `parent`, never following a link: a folder is made ours and opened with
    O_NOFOLLOW relative to its parent, and emptied the same way; what fails is named in `left`."""
    try:
        if not stat.S_ISDIR(os.lstat(name, dir_fd=parent).st_mode):
            os.unlink(name, dir_fd=parent)  # a file or a link: unlinking needs only the folder, never follows
            return
        if depth > _MAX_DEPTH:
            raise OSError(f"more than {_MAX_DEPTH} folders deep")
        # made ours first (a folder of mode 000 cannot be opened to read): through an O_PATH descriptor of that very
        # folder (O_NOFOLLOW: a link put in its place is not followed), chmod'ed by its /proc/self/fd name
        _make_ours(parent, name)
        fd = os.open(name, LIST_FLAGS, dir_fd=parent)
        try:
            for entry in os.listdir(fd):
                _remove_entry(fd, entry, depth + 1, left)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=parent)
    except OSError as exc:
        left.append(f"{name}: {exc.strerror or exc}"[:200])


def _remove_tree(path: Path) -> list[str]:
    """Remove a run's private folder whatever its kernel left in it; never follows a link, never raises.

    Returns what could not be removed (a few names with the reason), empty when all is gone."""
    left: list[str] = []
    try:
        parent = os.open(path.parent, LIST_FLAGS)
    except OSError as exc:
        return [f"{path.parent}: {exc.strerror or exc}"]
    try:
        _remove_entry(parent, path.name, 0, left)
    finally:
        os.close(parent)
    return left


#: The longest folder the kernel's unix sockets may live in: a socket's path holds at most 107 bytes (sun_path),
#: and the kernel's sockets are named <folder>/ipc/kernel-<n>.
MAX_SOCKET_FOLDER = 80


def _short_temp() -> str | None:
    """The temporary folder for a grading run's private folder: the usual one (TMPDIR), unless it is too long for
    the kernel's unix sockets (e.g. pytest's per-worker folders), then /tmp."""
    usual = tempfile.gettempdir()
    return None if len(os.fsencode(usual)) <= MAX_SOCKET_FOLDER - len("/distlab-grade-XXXXXXXX") else "/tmp"


def _run(raw: bytes, sources: list[str], questions: dict, problems: list[str], **options) -> dict:
    """The answers of the notebook's cells, run in a fresh kernel in a temporary copy ({} if none were read).

    The copy lives in a private folder of this run (mode 0700), which also holds the kernel's
    connection file and sockets; the folder is removed afterwards.
    """
    base = Path(tempfile.mkdtemp(prefix="distlab-grade-", dir=_short_temp()))
    work = base / "work"
    try:
        (base / "submission.ipynb").write_bytes(raw)  # bubblewrap: copied into the sandbox's own working copy
        if options.get("sandbox") != "bwrap":
            (work / ".tmp").mkdir(parents=True)
            (work / "submission.ipynb").write_bytes(raw)
        try:
            answers = run_in_kernel(
                sources, work, answer_names=[f"{ANSWER_PREFIX}{q}" for q in questions], problems=problems, **options
            )
        except Exception as exc:  # kernel failed to start, sandbox failed: the grader's problem, said plainly
            problems.append(f"the notebook could not be run: {type(exc).__name__}: {str(exc)[:300]}")
            answers = None
    finally:
        left = _remove_tree(base)
        if left:  # the instructor's to clean up: said, never a crash
            problems.append(f"the grader could not remove all of {base}: {'; '.join(left[:3])}")
    if answers is None:
        problems.append("no answers could be read from the kernel")
        answers = {}
    return answers


def grade_notebook(
    path,
    *,
    lesson: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float = DEFAULT_CELL_TIMEOUT,
    sandbox: str = "auto",
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
    file_size_limit: int | None = DEFAULT_FILE_SIZE_LIMIT,
    process_limit: int | None = DEFAULT_PROCESS_LIMIT,
    _audit_hook: bool = True,
    variants=None,
    identity=None,
    run=None,
    root=None,
) -> NotebookGrade:
    """Grade one notebook file; never raises for anything the file contains.

    timeout: seconds for the whole notebook; cell_timeout: seconds per cell. sandbox: "auto" or
    "bwrap" (bubblewrap, always with the audit hook; refused where bubblewrap cannot run),
    "container" (the caller runs in a throw-away container) or "trusted" (the audit hook only;
    "audit" is its old name); see the module docstring for what each does and does not protect.
    memory_limit, file_size_limit (bytes) and process_limit (None for no limit) cap the
    kernel's address space, the files it writes and the processes and threads it adds. lesson: grade against this lesson (a slug or an older name); a notebook of another
    lesson then gets zero. (_audit_hook=False is for testing the bubblewrap layer alone.)
    variants: a distlab.grading.variants.VariantPolicy (with the class roster) choosing each
    student's numbers; identity: the student as the submission platform names them (an id, an e-mail, or
    several of them). run: what gets the answers (default run_notebook, a fresh kernel; the container
    mode's two phases replace it, distlab.grading.gradescope). root: the folder the instructor named that holds
    the file, below which no link is followed when it is read (a class run's; default the file's own folder).
    """
    from .variants import VariantPolicy

    check_limits(timeout, cell_timeout, memory_limit, file_size_limit, process_limit)
    sandbox = _sandbox(sandbox)
    started = time.monotonic()
    path = Path(path)
    layers = [sandbox, *(["audit-hook"] if _audit_hook else [])]  # e.g. "bwrap+audit-hook", "trusted+audit-hook"
    grade = NotebookGrade(
        str(path),
        None if lesson is None else canonical(lesson),
        [],
        [],
        sandbox="+".join(layers) or "none",
        lesson_from="--lesson" if lesson is not None else "",
    )
    # the instructor's typo is an error, not a student's zero
    questions = lesson_questions(lesson) if lesson is not None else None
    raw = read_submission(path, grade.problems, root=root)
    read = None if raw is None else parse_sources(raw, grade.problems)
    if raw is None or read is None:
        _unreadable(grade, path, questions)
    else:
        metadata, sources = read
        questions = _choose_questions(grade, *identify_lesson(metadata, path.name, sources), questions)
        if questions is not None:  # a per-student variant: that student's numbers, or a refusal
            questions = (variants or VariantPolicy())(grade, metadata, questions, identity)
        if questions is not None and not any(s.strip() for s in sources):
            grade.problems.append("the notebook has no code cells")
            grade.questions = not_attempted(questions)
        elif questions is not None:
            answers = (run or _run)(
                raw,
                sources,
                questions,
                grade.problems,
                timeout=timeout,
                cell_timeout=cell_timeout,
                sandbox=sandbox,
                memory_limit=memory_limit,
                file_size_limit=file_size_limit,
                process_limit=process_limit,
                audit_hook=_audit_hook,
            )
            grade.questions = check_answers(questions, answers)
    grade.seconds = time.monotonic() - started
    return grade


def grade_notebooks(paths, **options) -> GradeReport:
    """Grade each notebook (directories: their *.ipynb files) in its own fresh kernel."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.glob("*.ipynb")))
        else:
            files.append(p)
    if not files:
        raise ConfigurationError("no notebooks to grade")
    return GradeReport([grade_notebook(f, **options) for f in files])


#: the answers of a notebook's cells, run in a fresh kernel (what grade_notebook's run= replaces)
run_notebook = _run
