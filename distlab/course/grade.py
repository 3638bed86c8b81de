"""Autograding of exercise notebooks: run the student's notebook, read the answers, check them here.

    from distlab.course import grade
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
   ``distlab.course.<lesson>`` module its cells import. Lessons are discovered: every module
   of :mod:`distlab.course` with a ``QUESTIONS`` dict is one. With ``lesson=`` given, a
   notebook that belongs to another lesson gets no points and says so.
3. A fresh kernel of this Python environment (nbclient) starts with the temporary folder as
   working directory. A first, private cell installs the sandbox (below) and must report
   back before any student code runs. Then every code cell runs in order, errors allowed
   (one bad cell does not stop the rest), each cell with a time limit and the whole notebook
   with a total time limit; a cell that runs too long is interrupted.
4. After every cell a private cell serialises the lesson's answer variables (``answer_q1``,
   ``answer_q2``, ...; each within an equal share of the output kept) to JSON between two random markers (a nonce the student cannot know). The
   grading process parses the last snapshot it could get (so answers given before an
   infinite loop or a crash still count) and calls the REAL checks of
   ``distlab.course.<lesson>.QUESTIONS`` here, in the grading process. A notebook that
   redefines or monkeypatches ``q1.check`` only changes its own kernel. Answers are read
   from the namespace, so reordered cells are fine; a missing cell leaves its question
   "not attempted".

The sandbox, and what it does not do
------------------------------------
Two layers protect the files outside the temporary working copy:

* **bubblewrap** (``sandbox="bwrap"``, and the default ``"auto"`` when the ``bwrap``
  program is installed and works): the kernel runs in a mount namespace where ``/`` is
  read-only and only the working copy is writable.
  That is enforced by the operating system. The kernel also gets private process, IPC and
  host-name namespaces (it sees no other process, so ``/proc/<pid>/root`` of a host process
  cannot lead it back to the writable file system), a new session and no capabilities. It
  shares the network with the host (the kernel talks to the grader over localhost).
* **a Python audit hook** (always, installed before any student code): it refuses writes,
  deletions, renames, links, permission changes and opening folders
  outside the working copy (symlinks and ``..`` resolved with the C functions
  ``lstat``/``readlink`` bound at install time), any new SQLite connection (``ATTACH`` would
  create a file anywhere); process creation (``subprocess``,
  ``os.system``, ``os.exec*``, ``fork``, ``posix_spawn``, ``pty``, ``!cmd``), signals to
  other processes (``os.kill``), ``ctypes``, ``sys.settrace``/``setprofile``,
  ``resource.setrlimit``, and replacing the code or the defaults of its own functions.
  Resource limits cap the size of the files the kernel writes and its address space.

The audit hook alone is **not an operating-system sandbox**. It stops accidents and
casual tampering (``os.remove``, ``shutil.rmtree``, ``open(..., "w")``, ``!rm``,
``subprocess``), but CPython's audit events do not cover everything: for example
``os.mkfifo`` and ``os.mknod`` raise no event (the hook removes them from ``os``, which a
determined student can undo), a symlink swapped by a second thread between
the check and the open can race it, C extensions can act without events, and reading
files (the kernel also sees the grader's environment variables), using the network and
burning CPU until the time limit are not prevented. Grade untrusted submissions with
bubblewrap installed (``apt-get install bubblewrap``), or inside a container or VM (as
Gradescope does); ``sandbox="audit"`` is for machines without it. The grading process
itself only reads the submitted file as JSON and never imports, executes or unpickles
anything from it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pkgutil
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

from ..errors import ConfigurationError

#: modules of distlab.course that are tooling, not lessons
_NOT_LESSONS = {"build", "checks", "execute", "grade"}
#: variables read from the student's namespace: answer_q1, answer_q2, ...
ANSWER_PREFIX = "answer_"
#: at most this many characters of an answer string are read
MAX_ANSWER_CHARS = 10_000
#: per cell, at most this much output is kept in the grading process (a print loop cannot fill memory)
MAX_OUTPUT_CHARS = 200_000
DEFAULT_TIMEOUT = 300.0
DEFAULT_CELL_TIMEOUT = 60.0
DEFAULT_MEMORY_LIMIT = 8 * 2**30  # address space of the kernel, bytes
DEFAULT_FILE_SIZE_LIMIT = 64 * 2**20  # largest file the kernel may write, bytes
SANDBOXES = ("auto", "bwrap", "audit")
AUDIT_ONLY_WARNING = ("warning: graded without bubblewrap (the Python audit hook only), which is not an operating-"
                      "system sandbox; grade untrusted work with bubblewrap installed (apt-get install bubblewrap) "
                      "or inside a container")


# --------------------------------------------------------------------------------------
# lessons
# --------------------------------------------------------------------------------------


def lesson_names() -> list[str]:
    """Names of the candidate lesson modules of distlab.course (not imported)."""
    from . import __path__ as course_path

    return sorted(m.name for m in pkgutil.iter_modules(course_path)
                  if not m.name.startswith("_") and m.name not in _NOT_LESSONS)


def lesson_questions(name: str) -> dict:
    """The QUESTIONS dict of lesson `name` (a module of distlab.course); ConfigurationError if none."""
    if name not in lesson_names():
        raise ConfigurationError(f"lesson {name!r} is not a module of distlab.course; "
                                 f"lessons: {', '.join(lessons()) or 'none'}")
    try:
        module = importlib.import_module(f"{__package__}.{name}")
    except Exception as exc:  # a lesson module with a bug: say so, do not crash the whole grading run
        raise ConfigurationError(f"distlab.course.{name} could not be imported "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None
    questions = getattr(module, "QUESTIONS", None)
    if not isinstance(questions, dict) or not questions:
        raise ConfigurationError(f"distlab.course.{name} has no QUESTIONS, so it is not a graded lesson")
    return questions


def lessons() -> dict[str, dict]:
    """Every graded lesson: {module name: QUESTIONS}. Modules that fail to import are skipped."""
    found = {}
    for name in lesson_names():
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except Exception:  # a lesson being written: not gradable yet, not our crash
            continue
        questions = getattr(module, "QUESTIONS", None)
        if isinstance(questions, dict) and questions:
            found[name] = questions
    return found


def _lesson_from_name(filename: str, names: Iterable[str]) -> str | None:
    """The lesson whose module name appears in the file name (longest match wins).

    '01_memory_wall.ipynb', 'memory_wall (1).ipynb' and 'jane_01_memory_wall-Copy1.ipynb'
    all give 'memory_wall'.
    """
    stem = Path(filename).name.lower()
    stem = re.sub(r"\.ipynb$", "", stem)
    hits = [n for n in names if re.search(rf"(^|[^a-z]){re.escape(n)}($|[^a-z])", stem)]
    return max(hits, key=len) if hits else None


_IMPORT = re.compile(r"(?:from\s+distlab\.course\.(\w+)\s+import|from\s+distlab\.course\s+import\s+(\w+)"
                     r"|import\s+distlab\.course\.(\w+))")


def _lesson_from_imports(sources: list[str], names: Iterable[str]) -> str | None:
    names = set(names)
    for source in sources:
        for match in _IMPORT.finditer(source):
            name = next(g for g in match.groups() if g)
            if name in names:
                return name
    return None


def identify_lesson(metadata: Any, filename: str, sources: list[str]) -> tuple[str | None, str]:
    """(lesson, how it was found): notebook metadata, then file name, then imports."""
    names = lesson_names()
    if isinstance(metadata, dict):
        meta = metadata.get("distlab")
        lesson = meta.get("lesson") if isinstance(meta, dict) else None
        if isinstance(lesson, str) and lesson:
            return lesson, "notebook metadata"
    lesson = _lesson_from_name(filename, names)
    if lesson:
        return lesson, "file name"
    lesson = _lesson_from_imports(sources, names)
    if lesson:
        return lesson, "imports"
    return None, ""


# --------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class QuestionGrade:
    question: str
    status: str
    points: float
    max_points: float
    feedback: str
    prompt: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class NotebookGrade:
    """The grade of one notebook: per-question results and what went wrong on the way."""

    path: str
    lesson: str | None
    questions: list[QuestionGrade]
    problems: list[str]
    sandbox: str = ""
    seconds: float = 0.0
    #: how the lesson was chosen: "--lesson", or the part of the notebook that named it
    lesson_from: str = ""

    @property
    def score(self) -> float:
        return float(sum(q.points for q in self.questions))

    @property
    def max_score(self) -> float:
        return float(sum(q.max_points for q in self.questions))

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "lesson": self.lesson,
            "score": self.score,
            "max_score": self.max_score,
            "problems": list(self.problems),
            "lesson_from": self.lesson_from,
            "sandbox": self.sandbox,
            "seconds": round(self.seconds, 2),
            "questions": [q.to_dict() for q in self.questions],
        }


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclasses.dataclass
class GradeReport:
    notebooks: list[NotebookGrade]

    @property
    def score(self) -> float:
        return float(sum(n.score for n in self.notebooks))

    @property
    def max_score(self) -> float:
        return float(sum(n.max_score for n in self.notebooks))

    def to_json(self) -> dict:
        """The JSON summary: top-level score and max_score, then one entry per question."""
        return {
            "score": self.score,
            "max_score": self.max_score,
            "questions": [
                {"notebook": n.path, "lesson": n.lesson, **q.to_dict()}
                for n in self.notebooks for q in n.questions
            ],
            "notebooks": [n.to_dict() for n in self.notebooks],
        }

    def to_gradescope(self) -> dict:
        """Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/).

        One test per question with its score, max_score, status and the check's feedback as
        output; the top-level output lists what went wrong while running the notebook.
        """
        several = len(self.notebooks) > 1
        tests = []
        for n in self.notebooks:
            for q in n.questions:
                prefix = f"{Path(n.path).name} " if several else ""
                tests.append({
                    "name": f"{prefix}{q.question}" + (f": {q.prompt}" if q.prompt else ""),
                    "score": q.points,
                    "max_score": q.max_points,
                    "status": "passed" if q.points >= q.max_points and q.max_points > 0 else "failed",
                    "output": q.feedback,
                })
        lines = []
        for n in self.notebooks:
            head = f"{Path(n.path).name}: {_fmt(n.score)}/{_fmt(n.max_score)}"
            lines.append(head + (f" (lesson {n.lesson})" if n.lesson else ""))
            lines.extend(f"  - {p}" for p in n.problems)
        return {
            "score": self.score,
            "execution_time": round(sum(n.seconds for n in self.notebooks), 1),
            "output": "\n".join(lines),
            "tests": tests,
        }

    def table(self) -> str:
        """A plain-text table per notebook: question, points, status, feedback; then the problems."""
        out = []
        for n in self.notebooks:
            origin = f" (from its {n.lesson_from})" if n.lesson and n.lesson_from != "--lesson" else ""
            out.append(f"{n.path}  lesson: {n.lesson or '?'}{origin}  score: {_fmt(n.score)}/{_fmt(n.max_score)}")
            if n.questions:
                width = max(8, *(len(q.question) for q in n.questions))
                out.append(f"  {'question':<{width}}  {'points':>7}  {'status':<13}  feedback")
                for q in n.questions:
                    points = f"{_fmt(q.points)}/{_fmt(q.max_points)}"
                    feedback = " ".join(q.feedback.split())
                    out.append(f"  {q.question:<{width}}  {points:>7}  {q.status:<13}  {feedback}")
            for p in n.problems:
                out.append(f"  ! {p}")
            out.append("")
        if len(self.notebooks) > 1:
            out.append(f"total: {_fmt(self.score)}/{_fmt(self.max_score)}")
        if any(n.sandbox and "bwrap" not in n.sandbox for n in self.notebooks):
            out.append(AUDIT_ONLY_WARNING)
        return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------------------
# reading the submitted file (never trusted)
# --------------------------------------------------------------------------------------


def _read_sources(path: Path, problems: list[str]) -> tuple[Any, list[str]] | None:
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


# --------------------------------------------------------------------------------------
# the kernel side: sandbox and answer collection (source text run inside the kernel)
# --------------------------------------------------------------------------------------

# Everything the hook uses is bound as a default argument at definition time (C builtins,
# frozensets, tuples), so student code cannot change its behaviour by monkeypatching
# modules or builtins; it reads no globals and has no closures (tests/test_grade.py checks
# the bytecode). Setting __code__/__defaults__ of functions is refused once it is installed.
_SANDBOX_SOURCE = r'''
def _distlab_sandbox(roots, allowed_files, memory_limit, fsize_limit, nonce, install_hook=True):
    import posix, sys
    # Import what kernels and lessons use while writing caches and loading libraries is still allowed.
    for name in ("ctypes", "ctypes.util", "subprocess", "numpy", "pint", "matplotlib", "matplotlib.pyplot",
                 "matplotlib.font_manager", "ipywidgets", "ipympl", "distlab", "distlab.units",
                 "distlab.course.checks"):
        try:
            __import__(name)
        except Exception:
            pass
    try:
        import resource
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        if fsize_limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))
    except Exception:
        pass
    # The one call that creates processes without an audit event: take it away (re-importing is refused below).
    try:
        import _posixsubprocess
        del _posixsubprocess.fork_exec
    except Exception:
        pass
    # mknod and mkfifo create files without an audit event: take them away too
    import os as _os
    for module in (posix, _os):
        for attr in ("mknod", "mkfifo"):
            try:
                delattr(module, attr)
            except Exception:
                pass
    import subprocess as _sp
    for attr in ("_fork_exec", "_posixsubprocess"):
        if hasattr(_sp, attr):
            try:
                setattr(_sp, attr, None)
            except Exception:
                pass

    import pathlib

    def resolve(path, dir_fd=None, _lstat=posix.lstat, _readlink=posix.readlink, _getcwd=posix.getcwd,
                _fspath=posix.fspath, _type=type, _str=str, _bytes=bytes, _int=int,
                _path_types=(pathlib.PosixPath, pathlib.PurePosixPath),
                _OSError=OSError, _PermissionError=PermissionError, _S_IFMT=0o170000, _S_IFLNK=0o120000):
        """The absolute path with symlinks and '..' resolved (missing tails kept), from C calls only."""
        t = _type(path)
        if t is _int:
            return _readlink("/proc/self/fd/" + _str(path))
        if t is not _str and t is not _bytes and t not in _path_types:
            raise _PermissionError("distlab grading sandbox: refusing a path object of type " + t.__name__)
        p = _fspath(path)
        if _type(p) is _bytes:
            p = p.decode("utf-8", "surrogateescape")
        if _type(p) is not _str or "\x00" in p:
            raise _PermissionError("distlab grading sandbox: bad path")
        if not p.startswith("/"):
            base = _getcwd() if (dir_fd is None or dir_fd == -1) else _readlink("/proc/self/fd/" + _str(dir_fd))
            p = base + "/" + p
        stack = [c for c in p.split("/") if c and c != "."]
        stack.reverse()
        out = []
        links = 0
        while stack:
            c = stack.pop()
            if c == "..":
                if out:
                    out.pop()
                continue
            candidate = "/" + "/".join(out + [c])
            try:
                mode = _lstat(candidate).st_mode
            except _OSError:
                out.append(c)
                continue
            if (mode & _S_IFMT) == _S_IFLNK:
                links += 1
                if links > 40:
                    raise _PermissionError("distlab grading sandbox: too many symbolic links")
                target = _readlink(candidate)
                if target.startswith("/"):
                    out = []
                more = [x for x in target.split("/") if x and x != "."]
                more.reverse()
                stack.extend(more)
            else:
                out.append(c)
        return "/" + "/".join(out)

    roots_t = tuple(resolve(r) for r in roots)
    files_t = frozenset(resolve(f) for f in allowed_files)

    def inside(path, dir_fd=None, _resolve=resolve, _roots=roots_t, _files=files_t):
        p = _resolve(path, dir_fd)
        if p in _files:
            return True
        for root in _roots:
            if p == root or p.startswith(root + "/"):
                return True
        return False

    def is_dir_outside(path, _resolve=resolve, _inside=inside, _stat=posix.stat, _type=type, _int=int,
                       _OSError=OSError, _S_IFMT=0o170000, _S_IFDIR=0o040000):
        if _type(path) is _int:
            return False
        try:
            if (_stat(_resolve(path)).st_mode & _S_IFMT) != _S_IFDIR:
                return False
        except _OSError:
            return False
        return not _inside(path)

    blocked = frozenset((
        "os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.startfile",
        "subprocess.Popen", "pty.spawn", "signal.pthread_kill", "sys.settrace",
        "sys.setprofile", "sys.monitoring.register_callback", "sys.addaudithook", "resource.setrlimit",
        "resource.prlimit", "sqlite3.enable_load_extension", "sqlite3.load_extension", "os.add_dll_directory",
        "os.setxattr", "os.removexattr", "os.chflags", "os.lchflags", "webbrowser.open",
    ))
    # events on one path, by the position of their dir_fd argument (None: they have none)
    fd_at_1 = frozenset(("os.remove", "os.rmdir", "shutil.rmtree"))
    fd_at_2 = frozenset(("os.mkdir", "os.chmod", "os.lchmod"))
    fd_at_3 = frozenset(("os.chown", "os.lchown", "os.utime"))
    no_fd = frozenset(("os.truncate", "tempfile.mkstemp", "tempfile.mkdtemp"))
    two_paths = frozenset(("os.rename", "os.link", "shutil.move"))
    dest_only = frozenset(("os.symlink", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
                           "shutil.copytree"))
    no_import = frozenset(("_posixsubprocess", "_ctypes", "ctypes", "_gdbm", "_dbm", "_testcapi",
                           "_testinternalcapi", "_xxsubinterpreters", "_xxinterpchannels", "_lsprof"))
    write_flags = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND

    def hook(event, args, _blocked=blocked, _fd1=fd_at_1, _fd2=fd_at_2, _fd3=fd_at_3, _no_fd=no_fd,
             _two=two_paths, _dest=dest_only,
             _no_import=no_import, _inside=inside, _dir_outside=is_dir_outside, _write_flags=write_flags,
             _PermissionError=PermissionError, _type=type, _int=int, _str=str, _len=len, _id=id,
             _getpid=posix.getpid, _protected=frozenset()):
        deny = None
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writing = (_type(flags) is _int and (flags & _write_flags)) or (
                _type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode))
            if writing:
                if _type(path) is not _int and not _inside(path):
                    deny = "writing " + _str(path)
            elif _dir_outside(path):
                deny = "opening the folder " + _str(path)  # a dir_fd would let os.open(..., dir_fd=) escape
        elif event in _fd1 or event in _fd2 or event in _fd3 or event in _no_fd:
            at = 1 if event in _fd1 else 2 if event in _fd2 else 3 if event in _fd3 else 99
            dir_fd = args[at] if _len(args) > at and _type(args[at]) is _int else None
            if not _inside(args[0], dir_fd):
                deny = event + " on " + _str(args[0])
        elif event in _two:
            sfd = args[2] if _len(args) > 2 and _type(args[2]) is _int else None
            dfd = args[3] if _len(args) > 3 and _type(args[3]) is _int else None
            if not (_inside(args[0], sfd) and _inside(args[1], dfd)):
                deny = event + " of " + _str(args[0]) + " to " + _str(args[1])
        elif event in _dest:
            dfd = args[2] if _len(args) > 2 and _type(args[2]) is _int else None
            if not _inside(args[1], dfd):
                deny = event + " to " + _str(args[1])
        elif event == "sqlite3.connect":  # even ":memory:": its ATTACH creates a file anywhere
            deny = "opening an SQLite database"
        elif event == "import":
            if args[0] in _no_import:
                deny = "importing " + _str(args[0])
        elif event == "os.kill" or event == "os.killpg":
            if args[0] != _getpid():  # the kernel interrupting itself (an interrupt request) is fine
                deny = event + " of another process"
        elif event == "object.__setattr__":
            if _id(args[0]) in _protected:
                deny = "changing the grading sandbox"
        elif event in _blocked or event.startswith("ctypes."):
            deny = event
        if deny is not None:
            raise _PermissionError("distlab grading sandbox: " + deny + " is not allowed while grading")

    # the hook's last default: the ids of its own functions, whose code and defaults may then not change
    hook.__defaults__ = hook.__defaults__[:-1] + (frozenset(map(id, (hook, resolve, inside, is_dir_outside))),)
    if install_hook:
        sys.addaudithook(hook)
    print("DISTLAB-SANDBOX-READY-" + nonce)
'''

_COLLECT_SOURCE = r'''
def _distlab_collect(ns, nonce, names, max_chars, budget, max_items=100000, max_depth=6):
    import itertools, json, numbers, sys
    left = [max_items]

    def enc(v, depth):
        left[0] -= 1
        t = type(v)
        if v is None:
            return {"t": "none"}
        if v is Ellipsis:
            return {"t": "ellipsis"}
        if isinstance(v, bool):
            return {"t": "bool", "v": bool(v)}
        if isinstance(v, str):
            return {"t": "str", "v": str.__str__(v)[:max_chars]}
        if t.__name__ == "Quantity" and t.__module__.split(".")[0] == "pint":
            m = v.magnitude
            if isinstance(m, bool) or not isinstance(m, numbers.Real):
                return {"t": "other", "type": "Quantity of " + type(m).__name__}
            m = int(m) if isinstance(m, numbers.Integral) else float(m)
            return {"t": "quantity", "magnitude": repr(m), "units": format(v.units, "C")}
        if isinstance(v, numbers.Integral):
            return {"t": "int", "v": repr(int(v))}
        if isinstance(v, numbers.Real):
            return {"t": "float", "v": repr(float(v))}
        if depth >= max_depth or left[0] <= 0:
            return {"t": "other", "type": t.__name__, "why": "too large"}
        if t.__module__ == "numpy" and t.__name__ == "ndarray":
            if v.size > left[0]:
                return {"t": "other", "type": "ndarray", "why": "too large"}
            return {"t": "ndarray", "dtype": str(v.dtype), "v": enc(v.tolist(), depth + 1)}
        if isinstance(v, (list, tuple, set, frozenset, range)):
            kind = next(k.__name__ for k in (list, tuple, set, frozenset, range) if isinstance(v, k))
            items = list(itertools.islice(iter(v), left[0] + 1))
            if len(items) > left[0]:
                return {"t": "other", "type": kind, "why": "too large"}
            return {"t": "seq", "kind": kind, "v": [enc(x, depth + 1) for x in items]}
        if isinstance(v, dict):
            items = list(itertools.islice(iter(v.items()), left[0] + 1))
            if len(items) > left[0]:
                return {"t": "other", "type": "dict", "why": "too large"}
            return {"t": "dict", "v": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in items]}
        return {"t": "other", "type": t.__name__}

    out = {}
    for key in names:
        if key not in ns:
            continue
        left[0] = max_items
        try:
            entry = json.dumps(enc(ns[key], 0))
            if len(entry) > budget:
                entry = json.dumps({"t": "other", "type": type(ns[key]).__name__, "why": "too large"})
        except Exception as exc:
            entry = json.dumps({"t": "other", "type": type(ns[key]).__name__, "error": type(exc).__name__})
        out[key] = entry
    text = "{" + ", ".join(json.dumps(k) + ": " + v for k, v in out.items()) + "}"
    sys.stdout.write("\n" + "DISTLAB-ANSWERS-BEGIN-" + nonce + text + "DISTLAB-ANSWERS-END-" + nonce + "\n")
    sys.stdout.flush()
'''


def _sandbox_cell(work: Path, nonce: str, memory_limit: int | None, fsize_limit: int | None,
                  audit_hook: bool = True) -> str:
    args = repr([[str(work)], ["/dev/null"], int(memory_limit or 0), int(fsize_limit or 0), nonce, bool(audit_hook)])
    return (f"exec(compile({_SANDBOX_SOURCE!r}, '<distlab-grading-sandbox>', 'exec'), __distlab_ns := {{}})\n"
            f"__distlab_ns['_distlab_sandbox'](*{args})\n"
            f"del __distlab_ns")


def _collect_cell(nonce: str, names: list[str]) -> str:
    """The private cell that prints the answers `names` (answer_q1, ...) between nonce markers.

    Each answer gets an equal share of the output the grader keeps per cell, so the snapshot
    always arrives whole; a larger answer arrives as "too large".
    """
    budget = (MAX_OUTPUT_CHARS - 2_000) // max(1, len(names)) - 100
    return (f"exec(compile({_COLLECT_SOURCE!r}, '<distlab-grading>', 'exec'), __distlab_ns := {{}})\n"
            f"__distlab_ns['_distlab_collect'](globals(), {nonce!r}, {names!r}, {MAX_ANSWER_CHARS}, {budget})\n"
            f"del __distlab_ns")


# --------------------------------------------------------------------------------------
# answers: decode in the grading process (robust to anything)
# --------------------------------------------------------------------------------------


class OpaqueAnswer:
    """Stands in for an answer of a type that cannot be carried over (a list, a function, ...)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name}>"

    __str__ = __repr__


def _opaque(type_name: str):
    name = re.sub(r"\W", "_", str(type_name))[:60] or "object"
    cls = type(name, (OpaqueAnswer,), {})  # check messages say "an answer of type list is not ..."
    return cls(str(type_name)[:60])


def _decode(entry: Any, depth: int = 0) -> Any:
    if not isinstance(entry, dict) or depth > 8:
        return _opaque("unknown")
    kind = entry.get("t")
    try:
        if kind == "none":
            return None
        if kind == "ellipsis":
            return Ellipsis
        if kind == "bool":
            return bool(entry["v"]) if isinstance(entry.get("v"), bool) else _opaque("bool")
        if kind == "str" and isinstance(entry.get("v"), str):
            return entry["v"][:MAX_ANSWER_CHARS]
        if kind == "int" and isinstance(entry.get("v"), str):
            return int(entry["v"])
        if kind == "float" and isinstance(entry.get("v"), str):
            return float(entry["v"])
        if kind == "quantity" and isinstance(entry.get("magnitude"), str) and isinstance(entry.get("units"), str):
            float(entry["magnitude"])  # a number, or this raises
            return f"{entry['magnitude']} {entry['units'][:200]}"
        if kind == "seq" and isinstance(entry.get("v"), list):
            items = [_decode(x, depth + 1) for x in entry["v"]]
            container = {"tuple": tuple, "set": set, "frozenset": frozenset}.get(entry.get("kind"), list)
            try:
                return container(items)
            except TypeError:  # unhashable items in a set
                return items
        if kind == "dict" and isinstance(entry.get("v"), list):
            return {_decode(k, depth + 1): _decode(x, depth + 1) for k, x in entry["v"]}
        if kind == "ndarray":
            import numpy as np

            dtype = np.dtype(str(entry.get("dtype"))[:20])
            if dtype.kind not in "biufc" or dtype.itemsize > 16:  # plain numbers only
                dtype = None
            return np.array(_decode(entry.get("v"), depth + 1), dtype=dtype)
        return _opaque(entry.get("type", "object"))
    except (ValueError, TypeError, KeyError, OverflowError):
        return _opaque(str(entry.get("type", kind)))


def parse_answers(text: str, nonce: str) -> dict | None:
    """The answers printed between the nonce markers in `text`, decoded; None when there are none."""
    begin, end = f"DISTLAB-ANSWERS-BEGIN-{nonce}", f"DISTLAB-ANSWERS-END-{nonce}"
    start = text.rfind(begin)
    if start < 0:
        return None
    stop = text.find(end, start)
    if stop < 0:
        return None
    try:
        data = json.loads(text[start + len(begin):stop])
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): _decode(v) for k, v in data.items() if isinstance(k, str)}


def check_answers(questions: dict, answers: dict) -> list[QuestionGrade]:
    """Run the real checks of `questions` on `answers` (answer_<name>), here in the grading process."""
    from .checks import INCORRECT

    grades = []
    for name, question in questions.items():
        answer = answers.get(f"{ANSWER_PREFIX}{name}")
        max_points = float(getattr(question, "points", 1.0))
        try:
            result = question.check(answer)
            grades.append(QuestionGrade(name, result.status, float(result.points), float(result.max_points),
                                        result.message, getattr(question, "prompt", "")))
        except Exception as exc:  # a check that cannot read a strange answer must not stop the grading
            grades.append(QuestionGrade(name, INCORRECT, 0.0, max_points,
                                        f"not yet, because the answer could not be checked "
                                        f"({type(exc).__name__}: {str(exc)[:200]})",
                                        getattr(question, "prompt", "")))
    return grades


def _not_attempted(questions: dict, why: str = "not attempted") -> list[QuestionGrade]:
    from .checks import NOT_ATTEMPTED

    return [QuestionGrade(name, NOT_ATTEMPTED, 0.0, float(getattr(q, "points", 1.0)), why, getattr(q, "prompt", ""))
            for name, q in questions.items()]


# --------------------------------------------------------------------------------------
# running the kernel
# --------------------------------------------------------------------------------------


def bwrap_available() -> bool:
    """True when the bubblewrap program exists and can create the sandbox (with every namespace) here."""
    if not shutil.which("bwrap"):
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="distlab-bwrap-") as work:
            done = subprocess.run([*_bwrap_prefix(Path(work)), "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _bwrap_prefix(work: Path) -> list[str]:
    """bubblewrap: the whole file system read-only, only the working copy writable.

    Private process, IPC and host-name namespaces: the kernel sees no other process, so it
    cannot reach the host's writable root through /proc/<pid>/root, signal the grader or
    share its memory. A new session (no terminal to inject keystrokes into) and no
    capabilities. The network stays shared: the kernel talks to the grader over localhost.
    (Not a private /tmp: the interpreter, a virtual environment or an editable checkout may
    live under /tmp, and the kernel must still start.)
    """
    return [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--proc", "/proc",
            "--bind", str(work), str(work), "--chdir", str(work),
            "--new-session", "--cap-drop", "ALL", "--die-with-parent",
            # in its own process namespace the kernel's parent is pid 1, which ipykernel's parent
            # poller takes for "the parent died": no poller (--die-with-parent does its job)
            "--unsetenv", "JPY_PARENT_PID"]


def _kernel_manager(argv_prefix: list[str], connection_file: Path):
    import ipykernel.kernelspec
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class GradingKernels(KernelSpecManager):
        """Every kernel name resolves to ipykernel on this interpreter, optionally under bubblewrap."""

        def get_kernel_spec(self, kernel_name):
            spec = ipykernel.kernelspec.get_kernel_dict()
            spec["argv"] = [*argv_prefix, *spec["argv"]]
            # interrupt by message: the kernel signals itself. A SIGINT sent from outside would also
            # reach bubblewrap, which would die and take the kernel with it.
            spec["interrupt_mode"] = "message"
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **spec)

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=GradingKernels(),
                              connection_file=str(connection_file))


def _client_class():
    from nbclient import NotebookClient

    class GradingClient(NotebookClient):
        """Keeps only stdout and errors of each cell (at most MAX_OUTPUT_CHARS), and notes timeouts."""

        timed_out_cells: set = set()

        async def _async_handle_timeout(self, timeout, cell=None):
            if cell is not None:
                self.timed_out_cells = {*self.timed_out_cells, id(cell)}
            return await super()._async_handle_timeout(timeout, cell)

        def output(self, outs, msg, display_id, cell_index):
            kind = msg["msg_type"]
            content = msg.get("content", {})
            if kind == "stream" and content.get("name") == "stdout":
                kept = sum(len(o.get("text", "")) for o in outs if o.get("output_type") == "stream")
                text = str(content.get("text", ""))[: max(0, MAX_OUTPUT_CHARS - kept)]
                if text:
                    if outs and outs[-1].get("output_type") == "stream":
                        outs[-1]["text"] += text
                    else:
                        from nbformat.v4 import new_output

                        outs.append(new_output("stream", name="stdout", text=text))
            elif kind == "error":
                from nbformat.v4 import new_output

                outs.append(new_output("error", ename=str(content.get("ename", "Error"))[:200],
                                       evalue=str(content.get("evalue", ""))[:1000], traceback=[]))
            return None

    return GradingClient


def _kernel_env(work: Path) -> dict:
    env = dict(os.environ)
    env.update({
        "TMPDIR": str(work / ".tmp"),
        "IPYTHONDIR": str(work / ".ipython"),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    env.pop("PYTHONSTARTUP", None)
    return env


def _first_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            line = line.strip()
            return line if len(line) <= 60 else line[:57] + "..."
    return ""


def _run_in_kernel(sources: list[str], work: Path, *, answer_names: list[str], timeout: float,
                   cell_timeout: float, sandbox: str, memory_limit: int | None, file_size_limit: int | None,
                   problems: list[str], audit_hook: bool = True) -> dict | None:
    """Execute the student's cells; return the last answer snapshot (None if none could be read)."""
    import nbformat.v4 as v4
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    nonce = secrets.token_hex(16)
    deadline = time.monotonic() + timeout
    connection_file = work.parent / "kernel.json"
    prefix = _bwrap_prefix(work) if sandbox == "bwrap" else []

    def cell_limit(cell):
        limit = cell.metadata.get("distlab_timeout", cell_timeout)
        return max(1, int(min(limit, deadline - time.monotonic()) + 0.999))

    nb = v4.new_notebook()
    client = _client_class()(
        nb, km=_kernel_manager(prefix, connection_file), timeout_func=cell_limit, allow_errors=True,
        interrupt_on_timeout=True, error_on_timeout={"ename": "TimeoutError", "evalue": "cell time limit",
                                                      "traceback": []},
        store_widget_state=False, startup_timeout=120, iopub_timeout=2, raise_on_iopub_timeout=False,
        shutdown_kernel="immediate", record_timing=False, resources={"metadata": {"path": str(work)}},
    )

    def run(source: str, index: int, limit: float | None = None, history: bool = True):
        cell = v4.new_code_cell(source)
        if limit is not None:
            cell.metadata["distlab_timeout"] = limit
        nb.cells.append(cell)
        client.execute_cell(cell, len(nb.cells) - 1, store_history=history)
        return cell

    def stdout(cell) -> str:
        return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")

    def error(cell):
        return next((o for o in cell.outputs if o.get("output_type") == "error"), None)

    snapshot = None
    unreadable = False
    # the kernel's own stdout/stderr (startup warnings) are not the student's output: drop them
    with client.setup_kernel(env=_kernel_env(work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        boot = run(_sandbox_cell(work, nonce, memory_limit, file_size_limit, audit_hook), -1, limit=120,
                   history=False)
        if f"DISTLAB-SANDBOX-READY-{nonce}" not in stdout(boot):
            err = error(boot)
            raise RuntimeError("the grading sandbox could not be installed in the kernel"
                               + (f": {err['ename']}: {err['evalue']}" if err else ""))
        for number, source in enumerate(sources, start=1):
            if not source.strip():
                continue
            if time.monotonic() >= deadline:
                problems.append(f"the notebook's time limit ({timeout:g} s) was reached before code cell {number}; "
                                "it and the cells after it did not run")
                break
            try:
                cell = run(source, number)
            except DeadKernelError:
                problems.append(f"the kernel stopped (crashed, exited or ran out of memory) in code cell {number} "
                                f"(`{_first_line(source)}`); the cells after it did not run")
                break
            except CellTimeoutError:
                problems.append(f"code cell {number} did not finish and could not be interrupted; "
                                "the cells after it did not run")
                break
            err = error(cell)
            timed_out = id(cell) in client.timed_out_cells
            if timed_out:
                problems.append(f"code cell {number} (`{_first_line(source)}`) ran longer than its time limit "
                                f"({min(cell_timeout, timeout):g} s) and was "
                                "interrupted (an infinite loop?)")
            elif err is not None:
                problems.append(f"code cell {number} (`{_first_line(source)}`) raised "
                                f"{err.get('ename')}: {str(err.get('evalue'))[:300]}")
            try:
                collected = run(_collect_cell(nonce, answer_names), -1, limit=15 if not timed_out else 5,
                                history=False)
            except (DeadKernelError, CellTimeoutError):
                problems.append(f"the kernel stopped after code cell {number}; the cells after it did not run")
                break
            answers = parse_answers(stdout(collected), nonce)
            if answers is not None:
                snapshot = answers
            elif timed_out:
                problems.append(f"the kernel did not respond after code cell {number} was interrupted; "
                                "the cells after it did not run")
                break
            elif not unreadable:
                unreadable = True
                problems.append(f"the answers could not be read after code cell {number} "
                                f"(`{_first_line(source)}`); the answers read before it count")
    return snapshot


def _remove_tree(path: Path) -> None:
    def retry(func, p, _exc):
        try:
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


def grade_notebook(path, *, lesson: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                   cell_timeout: float = DEFAULT_CELL_TIMEOUT, sandbox: str = "auto",
                   memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
                   file_size_limit: int | None = DEFAULT_FILE_SIZE_LIMIT, _audit_hook: bool = True) -> NotebookGrade:
    """Grade one notebook file; never raises for anything the file contains.

    timeout: seconds for the whole notebook; cell_timeout: seconds per cell. sandbox: "auto"
    (bubblewrap when it works here, always with the audit hook), "bwrap" or "audit" (see the
    module docstring for what each does and does not protect). memory_limit and
    file_size_limit (bytes, None for no limit) cap the kernel's address space and the files it
    writes. lesson: grade against this lesson; a notebook of another lesson then gets zero.
    (_audit_hook=False is for testing the bubblewrap layer alone.)
    """
    if sandbox not in SANDBOXES:
        raise ConfigurationError(f"sandbox={sandbox!r}; valid: {', '.join(SANDBOXES)}")
    if sandbox == "auto":
        sandbox = "bwrap" if bwrap_available() else "audit"
    elif sandbox == "bwrap" and not bwrap_available():
        raise ConfigurationError("sandbox='bwrap' but bubblewrap is not installed or cannot run here "
                                 "(apt-get install bubblewrap), use sandbox='auto' or 'audit'")
    started = time.monotonic()
    path = Path(path)
    problems: list[str] = []
    layers = [*(["bwrap"] if sandbox == "bwrap" else []), *(["audit-hook"] if _audit_hook else [])]
    grade = NotebookGrade(str(path), lesson, [], problems, sandbox="+".join(layers) or "none",
                          lesson_from="--lesson" if lesson is not None else "")

    def finish() -> NotebookGrade:
        grade.seconds = time.monotonic() - started
        return grade

    questions = None
    if lesson is not None:
        questions = lesson_questions(lesson)  # the instructor's typo is an error, not a student's zero

    read = _read_sources(path, problems)
    if read is None:
        if questions is None:
            found = _lesson_from_name(path.name, lesson_names())
            if found:
                try:
                    questions, grade.lesson, grade.lesson_from = lesson_questions(found), found, "file name"
                except ConfigurationError:
                    pass
        if questions is not None:
            grade.questions = _not_attempted(questions, "not attempted (the notebook could not be read)")
        return finish()
    metadata, sources = read

    found, how = identify_lesson(metadata, path.name, sources)
    if lesson is not None:
        if found is not None and found != lesson:
            problems.append(f"this notebook belongs to lesson {found!r} (from its {how}), not to {lesson!r}: "
                            "it was not graded; submit the exercise notebook of this lesson")
            grade.questions = _not_attempted(questions, f"not attempted (the notebook submitted is lesson {found!r})")
            return finish()
    else:
        if found is None:
            problems.append("cannot tell which lesson this notebook belongs to (no distlab lesson in its metadata, "
                            "file name or imports); grade it with --lesson NAME")
            return finish()
        try:
            questions = lesson_questions(found)
        except ConfigurationError as exc:
            problems.append(f"the notebook names lesson {found!r} (from its {how}), but {exc}")
            return finish()
        grade.lesson, grade.lesson_from = found, how

    if not any(s.strip() for s in sources):
        problems.append("the notebook has no code cells")
        grade.questions = _not_attempted(questions)
        return finish()

    base = Path(tempfile.mkdtemp(prefix="distlab-grade-"))
    work = base / "work"
    try:
        (work / ".tmp").mkdir(parents=True)
        shutil.copyfile(path, work / "submission.ipynb")
        try:
            answers = _run_in_kernel(sources, work, answer_names=[f"{ANSWER_PREFIX}{q}" for q in questions],
                                     timeout=timeout, cell_timeout=cell_timeout, sandbox=sandbox,
                                     memory_limit=memory_limit, file_size_limit=file_size_limit, problems=problems,
                                     audit_hook=_audit_hook)
        except Exception as exc:  # kernel failed to start, sandbox failed: the grader's problem, said plainly
            problems.append(f"the notebook could not be run: {type(exc).__name__}: {str(exc)[:300]}")
            answers = None
    finally:
        _remove_tree(base)
    if answers is None:
        problems.append("no answers could be read from the kernel")
        answers = {}
    grade.questions = check_answers(questions, answers)
    return finish()


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
