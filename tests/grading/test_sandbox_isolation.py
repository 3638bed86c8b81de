"""The kernel's world is built by allow-list and enforced by the operating system (issue 28).

Every attack here runs in a real bubblewrap kernel with the Python audit hook switched OFF (`audit_hook=False`,
or ctypes calls that raise no audit event): what it finds is what the sandbox itself lets through, so nothing
depends on the hook. The comment on each test says what main's kernel (the host's whole file system bound
read-only, the kernel running as the grader, root here, with a copy of the grader's environment) did; the
probes were run against main's distlab/grading with the hook off: every target opened by all nine ways, 50+
search hits, uid 0, the secret in the environment, the real lesson module imported, 863 of 1,000 threads
started, a file written into the host folder around the kernel's sockets.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import distlab
from distlab.grading import grade, sandbox
from distlab.grading.kernel import bwrap_available, run_in_kernel
from distlab.grading.student_view import student_view

from test_grade import ANSWERS, IMPORTS, ROOT, statuses, write_notebook

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here"),
]

#: the real lesson 1 question module, in the grader's checkout or installation
REAL_LESSON = Path(distlab.__file__).resolve().parent / "lessons" / "memory_wall.py"


def probe(
    code: str, *, audit_hook: bool = False, process_limit: int | None = 256, timeout: float = 120, mode="bwrap"
) -> dict:
    """Run `code` in one kernel (bubblewrap unless told); it leaves a dict in `answer_x`, returned here."""
    return probes({"x": code}, audit_hook=audit_hook, process_limit=process_limit, timeout=timeout, mode=mode)["x"]


def probes(
    codes: dict[str, str],
    *,
    audit_hook: bool = False,
    process_limit: int | None = 256,
    timeout: float = 120,
    mode="bwrap",
) -> dict[str, dict]:
    """Run each code (a dict in `answer_x`), in order, in one kernel; {name: its dict, with the run's problems}."""
    base = Path(tempfile.mkdtemp(prefix="distlab-probe-"))
    (base / "work" / ".tmp").mkdir(parents=True)  # what the old kernel needed: the probe runs on both
    (base / "submission.ipynb").write_text("{}")
    problems: list[str] = []
    # each code's answer_x kept under its own name (answer_x itself for the one probe() runs)
    cells = [c for name, code in codes.items() for c in (code, "" if name == "x" else f"answer_{name} = answer_x")]
    try:
        snapshot = run_in_kernel(
            cells,
            base / "work",
            answer_names=[f"answer_{name}" for name in codes],
            timeout=timeout * len(codes),
            cell_timeout=timeout,
            sandbox=mode,
            memory_limit=8 * 2**30,
            file_size_limit=64 * 2**20,
            problems=problems,
            audit_hook=audit_hook,
            process_limit=process_limit,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    found = {name: (snapshot or {}).get(f"answer_{name}") for name in codes}
    assert all(isinstance(f, dict) for f in found.values()), (found, problems)
    return {name: {"problems": problems, **f} for name, f in found.items()}


# one kernel tries every way into the host's files it can think of, the hook off
READ_ATTACKS = r'''
import ctypes, os, json
answer_x = {}
targets = json.loads(TARGETS)
libc = ctypes.CDLL(None, use_errno=True)
def opened(path):
    """Which of several ways of opening `path` succeed."""
    ways = []
    try:
        with open(path, "rb") as f:
            f.read(1)
        ways.append("open")
    except OSError:
        pass
    fd = libc.open(path.encode(), 0)  # the C library directly: no audit event
    if fd >= 0:
        ways.append("libc.open")
        libc.close(fd)
    fd = libc.syscall(257, -100, path.encode(), 0, 0)  # openat(AT_FDCWD, path, O_RDONLY) as a raw syscall
    if fd >= 0:
        ways.append("syscall.openat")
        libc.close(fd)
    for prefix in ("/proc/self/root", "/proc/1/root", "/proc/2/root", "/proc/1/cwd/../../../.."):
        try:
            with open(prefix + path, "rb") as f:
                f.read(1)
            ways.append(prefix)
        except OSError:
            pass
    try:  # relative to a directory file descriptor of the root, and with '..' from the working copy
        root = os.open("/", os.O_RDONLY)
        try:
            fd = os.open(path.lstrip("/"), os.O_RDONLY, dir_fd=root)
            os.close(fd)
            ways.append("dir_fd")
        finally:
            os.close(root)
    except OSError:
        pass
    try:
        with open("../" * 12 + path.lstrip("/"), "rb") as f:
            f.read(1)
        ways.append("..")
    except OSError:
        pass
    return ways
for name, path in targets.items():
    answer_x[name] = opened(path)
# a search of the whole visible disk for the answer key, the tests, the solutions or a classmate's notebook
hits = []
for folder, dirs, files in os.walk("/"):
    if folder.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    for f in files:
        if f.endswith(".ipynb") and folder not in (os.getcwd(), "/run/distlab") \
                or f in ("course.key", "roster.csv", "shadow", "test_grade.py", "test_attacks.py") \
                or "/solutions" in folder or "/.git/" in folder + "/":
            hits.append(folder + "/" + f)
        elif f.endswith(".py") and "/lessons" in folder and f not in ("questions.py", "stub.py", "__init__.py"):
            try:
                text = open(folder + "/" + f, errors="replace").read()
            except OSError:
                continue
            if "expected=" in text or "def _explain" in text:
                hits.append(folder + "/" + f)
answer_x["search"] = hits[:50]
answer_x["root"] = sorted(os.listdir("/"))
answer_x["uid"] = os.getuid()
answer_x["env"] = sorted(os.environ)
answer_x["secret"] = os.environ.get("DISTLAB_VARIANT_SECRET", "")
'''


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """An instructor's course folder on the host: the key and the roster the kernel must not see."""
    folder = tmp_path_factory.mktemp("course")
    (folder / "course.key").write_text("k" * 32)
    (folder / "roster.csv").write_text("id\nalice\nbob\n")
    classmate = folder / "submitted" / "bob"
    classmate.mkdir(parents=True)
    write_notebook(classmate / "01_memory_wall.ipynb", [IMPORTS, *ANSWERS.values()])
    return folder


@pytest.fixture(scope="module")
def shared_probe(course):
    """One hostile kernel (hook off) runs three independent attacks, each its own cell, in this order: READ_ATTACKS
    (what it could open and find; the grader's environment holds the secret), WRITE_ATTACKS (writes, a signal to
    the grader, the network) and STUDENT_VIEW (what it imports of the lessons). None changes what a later one sees:
    the reads create nothing, a refused write leaves nothing (and the writes' targets are none of the reads' or
    the student view's files), and the student view only imports. {"read": ..., "write": ..., "view": ...}"""
    targets = {
        "shadow": "/etc/shadow",
        "passwd": "/etc/passwd",
        "root_home": "/root/.bashrc",
        "lesson_source": str(REAL_LESSON),
        "tests": str(ROOT / "tests" / "grading" / "test_grade.py"),
        "solutions": str(ROOT / "solutions" / "01_memory_wall.ipynb"),
        "git": str(ROOT / ".git" / "HEAD"),
        "course_key": str(course / "course.key"),
        "roster": str(course / "roster.csv"),
        "classmate": str(course / "submitted" / "bob" / "01_memory_wall.ipynb"),
    }
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    os.environ["DISTLAB_VARIANT_SECRET"] = "s3cret-of-the-instructor"
    try:
        write = (
            f"GRADER, PORT = {os.getpid()}, {listener.getsockname()[1]}\n"
            "IPC = [p for p in __import__('os').listdir('/tmp') if p != 'work']\n"
            "IPC = '/tmp/' + IPC[0] + '/ipc' if IPC else '/nonexistent'\n" + WRITE_ATTACKS
        )
        return probes(
            {"read": f"TARGETS = {json.dumps(targets)!r}\n" + READ_ATTACKS, "write": write, "view": STUDENT_VIEW}
        )
    finally:
        del os.environ["DISTLAB_VARIANT_SECRET"]
        listener.close()


@pytest.fixture(scope="module")
def read_attacks(shared_probe):
    """What one hostile kernel (hook off) could open and find; the grader's environment holds the secret."""
    return shared_probe["read"]


@pytest.mark.parametrize(
    "target",
    [
        "shadow",
        "passwd",
        "root_home",
        "lesson_source",
        "tests",
        "solutions",
        "git",
        "course_key",
        "roster",
        "classmate",
    ],
)
def test_no_host_file_exists_for_the_kernel_whatever_the_path_or_call(read_attacks, target):
    # old kernel: "/" was bound read-only, so every one of these opened (as root, /etc/shadow too)
    assert read_attacks[target] == [], f"{target} opened by {read_attacks[target]}"


def test_a_search_of_the_whole_disk_finds_no_answer_key_tests_solutions_or_classmate(read_attacks):
    # old kernel: the walk found the checkout's distlab/lessons/*.py, tests/, solutions/ and the classmate's notebook
    assert read_attacks["search"] == []


def test_only_the_allowed_folders_exist_at_the_root(read_attacks):
    # old kernel: every folder of the host (/etc, /home, /var, /srv, ...). Now: the runtime's and the
    # environment's own paths (/root/... only when the runtime lives there, /work/... for a venv in a checkout)
    assert not {"etc", "home", "var", "srv", "mnt", "boot"} & set(read_attacks["root"])
    assert {"tmp", "proc", "dev", "usr", "opt"} <= set(read_attacks["root"])


def test_the_kernel_environment_is_an_allow_list_without_the_secret(read_attacks):
    # old kernel: a copy of the grader's environment, DISTLAB_VARIANT_SECRET included
    assert read_attacks["secret"] == ""
    assert "DISTLAB_VARIANT_SECRET" not in read_attacks["env"]
    allowed = set(sandbox.sandbox_env(sandbox.SandboxWorld.__new__(sandbox.SandboxWorld)))
    # ipykernel and IPython add their own (PWD from bubblewrap's chdir, TERM, PAGER, ...): none is the grader's
    grader_only = set(os.environ) - allowed - {"PWD", "TERM", "PAGER", "GIT_PAGER", "CLICOLOR", "FORCE_COLOR"}
    assert not grader_only & set(read_attacks["env"])


@pytest.mark.skipif(os.geteuid() != 0, reason="the grader runs as root only here")
def test_a_root_grader_runs_the_kernel_as_an_unprivileged_user(read_attacks):
    # old kernel: uid 0 with the grader's capabilities bounded only by bwrap's --cap-drop
    assert read_attacks["uid"] >= sandbox.KERNEL_UID_BASE


WRITE_ATTACKS = r"""
import os, signal, socket, json
answer_x = {}
grader, port, ipc = GRADER, PORT, IPC
writes = []
for path in ("/escape", "/usr/lib/escape", "/opt/distlab-view/escape", "/opt/distlab-view/distlab/lessons/memory_wall.py",
             os.path.dirname(os.__file__) + "/escape", ipc + "/escape", ipc + "/kernel.json",
             os.path.dirname(ipc) + "/escape", "/proc/1/root/escape", "/dev/escape", "/dev/shm/escape"):
    try:
        with open(path, "a") as f:
            f.write("x")
        writes.append(path)
    except OSError:
        pass
answer_x["writes"] = writes
try:
    os.kill(grader, signal.SIGTERM)
    answer_x["signal"] = "sent"
except OSError as exc:
    answer_x["signal"] = type(exc).__name__
try:
    os.kill(-1, 0)  # every process it may signal: only its own namespace's
except OSError:
    pass
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    answer_x["network"] = "connected"
except OSError as exc:
    answer_x["network"] = type(exc).__name__
with open("/proc/net/dev") as f:  # the interfaces of the reader's own network namespace
    answer_x["interfaces"] = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
try:  # netlink (socket.if_nameindex's way) is refused by the seccomp filter: red team round 6 default/07
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
    answer_x["netlink"] = "opened"
except OSError as exc:
    answer_x["netlink"] = exc.errno
"""


def test_the_kernel_writes_only_to_its_copy_signals_nothing_and_has_no_network(shared_probe):
    # old kernel (checked on main): it wrote into its private host folder (the sockets' folder, bound writable,
    # on the host's disk: the way 1.4 GB reached the host's temporary folder); now only base/ipc is bound and it
    # is locked before student code runs. The signal, network and read-only checks passed on main's bubblewrap
    # mode too (issue 28 found those in container mode, grading2's part): kept here so the allow-list keeps them
    found = shared_probe["write"]
    assert found["writes"] == []
    assert found["signal"] == "ProcessLookupError"  # the grader is not even in its process namespace
    assert found["network"] != "connected"
    assert found["interfaces"] == ["lo"] and found["netlink"] == 22  # EINVAL


@pytest.mark.skipif(os.geteuid() != 0, reason="root is exempt from RLIMIT_NPROC only when the grader is root")
def test_threads_past_the_process_limit_fail_even_when_the_grader_is_root():
    # old kernel: ran as root, which RLIMIT_NPROC does not bind: all 1,000 threads started
    code = textwrap.dedent(
        """
        import threading, time
        stop = threading.Event()
        started = 0
        for _ in range(1000):
            try:
                threading.Thread(target=stop.wait, daemon=True).start()
                started += 1
            except RuntimeError:
                break
        stop.set()
        answer_x = {"started": started}
        """
    )
    found = probe(code, process_limit=256)
    assert found["started"] < 256


def test_the_copy_and_temporary_files_share_one_disk_quota_off_the_host_disk():
    # old kernel: 1.4 GB reached the host's temporary folder in files under the per-file limit. Now the working
    # copy and /tmp are one tmpfs of DEFAULT_DISK_QUOTA bytes; the try stops at ~400 MB (twice that, at most)
    code = textwrap.dedent(
        """
        import os
        chunk = b"x" * (4 << 20)
        written = 0
        for i in range(100):
            for folder in (".", "/tmp", os.environ.get("TMPDIR", "/tmp"), "/dev/shm"):
                try:
                    with open(f"{folder}/fill-{i}", "wb") as f:
                        f.write(chunk)
                    written += len(chunk)
                except OSError:
                    pass
            if written > 2 * (256 << 20):
                break
        answer_x = {"written": written}
        """
    )
    found = probe(code)
    assert found["written"] <= sandbox.DEFAULT_DISK_QUOTA  # /dev and /dev/shm are read-only


def _kernel_users(uid_wanted: int | None = None) -> list[int]:
    """pids of processes running as a kernel's user id (uid_wanted: that one only; other tests' kernels run beside
    this one under pytest-xdist)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if uid_wanted is not None and uid != uid_wanted:
                continue
            if sandbox.KERNEL_UID_BASE <= uid < sandbox.KERNEL_UID_BASE + sandbox.KERNEL_UID_SPAN:
                out.append(int(entry))
    return out


def test_no_process_is_left_after_a_notebook():
    # daemons in their own sessions, double-forked: gone with the kernel's process namespace
    code = textwrap.dedent(
        """
        import os, time
        for _ in range(3):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
        answer_x = {"forked": 3, "uid": os.getuid()}
        """
    )
    found = probe(code)
    assert found["forked"] == 3
    assert _kernel_users(found["uid"]) == []


STUDENT_VIEW = r"""
import inspect, sys
import distlab.lessons.memory_wall as m
from distlab.lessons.memory_wall import q1, q5
from distlab.lessons.variants import personal
answer_x = {
    "file": m.__file__,
    "expected": any(hasattr(q, name) for q in m.QUESTIONS.values() for name in ("expected", "explain", "feedback")),
    "helpers": sorted(k for k, v in vars(m).items() if callable(v) and getattr(v, "__module__", "") == m.__name__),
    "check": q1.check(16).message,
    "solution": repr(q5.solution()),
    "personal": type(personal("memory_wall", "q1 q2", "seed")[0]).__name__,
    "grading": "distlab.grading" in sys.modules or __import__("importlib").util.find_spec("distlab.grading") is not None,
    "source_has_key": "def _" in inspect.getsource(m),
}
"""


def test_the_answer_key_never_enters_the_kernel(shared_probe):
    # old kernel: imported the real distlab.lessons.memory_wall and removed expected/explain afterwards (the
    # source file, its helpers' code objects and the variants' templates stayed reachable)
    found = shared_probe["view"]
    assert found["file"].startswith(sandbox.SANDBOX_VIEW)
    assert found["expected"] is False
    assert found["helpers"] == []
    assert found["check"] == "checked by the grader after the notebook has run"
    assert "withheld" in found["solution"]
    assert found["personal"] == "QuestionStub"
    assert found["grading"] is False
    assert found["source_has_key"] is False


def test_the_student_view_on_disk_holds_no_expected_explain_or_feedback_code():
    view = student_view() / "distlab"
    from distlab.lessons import LESSONS

    for lesson in LESSONS.values():
        if not lesson.questions:
            continue
        module = view / "lessons" / f"{lesson.questions.rpartition('.')[2]}.py"
        text = module.read_text()
        assert "expected=" not in text and "explain=" not in text, module.name
        assert "def " not in text and "lambda" not in text, module.name
    assert not (view / "grading").exists()


def test_every_module_of_the_student_view_has_the_bytecode_of_its_own_source():
    # a grading kernel may write no bytecode: the view brings it (compiled once per grading process, not by every
    # kernel). Each .pyc's header names the size and mtime of the source it was compiled from (PEP 552 timestamp
    # form: flags 0, then mtime and size, little-endian 32-bit), so a lesson stub's bytecode is the stub's, never
    # the real module's (the answer key)
    import importlib.util

    view = student_view() / "distlab"
    sources = sorted(view.rglob("*.py"))
    assert len(sources) > 100
    for source in sources:
        compiled = Path(importlib.util.cache_from_source(str(source)))
        header = compiled.read_bytes()[:16]
        stat = source.stat()
        assert header[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(header[4:8], "little") == 0, source
        assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF, source
        assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF, source
        assert not compiled.stat().st_mode & 0o222, source  # read-only, as the sources


def test_every_name_an_exercise_imports_from_a_lesson_exists_in_the_student_view():
    # the stubs keep what exercises import (q1.., and capstone's setup constants), so graded notebooks still run
    import ast
    import importlib.util

    view = student_view()
    for exercise in sorted((ROOT / "exercises").glob("*.ipynb")):
        nb = json.loads(exercise.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("distlab.lessons."):
                    path = view / Path(*node.module.split(".")).with_suffix(".py")
                    spec = importlib.util.spec_from_file_location("stub", path)
                    source = path.read_text()
                    for alias in node.names:
                        assert f"\n{alias.name} = " in source or f"'{alias.name}': " in source, (
                            exercise.name,
                            alias.name,
                            spec,
                        )


def test_a_generic_notebook_that_hunts_for_the_answer_key_scores_nothing(tmp_path):
    # the worst finding: one notebook, no answer typed, full marks on every lesson. It looks for the
    # lesson's question code anywhere it can reach and runs it; with the key outside the kernel it finds none
    hunt = textwrap.dedent(
        """
        import os, importlib.util
        for folder, dirs, files in os.walk("/"):
            if folder.startswith(("/proc", "/sys", "/dev")):
                dirs[:] = []
                continue
            if "memory_wall.py" in files and "/lessons" in folder:
                spec = importlib.util.spec_from_file_location("distlab.lessons._key", folder + "/memory_wall.py",
                                                              submodule_search_locations=None)
                try:
                    key = importlib.util.module_from_spec(spec)
                    key.__package__ = "distlab.lessons"
                    spec.loader.exec_module(key)
                    for name, q in key.QUESTIONS.items():
                        globals()["answer_" + name] = q.expected()
                except Exception:
                    pass
        """
    )
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, hunt])
    result = grade.grade_notebook(path, timeout=180, _audit_hook=False)
    assert set(statuses(result).values()) == {"not attempted"}, result.problems


def test_solved_notebook_still_scores_full_marks(tmp_path):
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, *ANSWERS.values()])
    result = grade.grade_notebook(path, timeout=180)
    assert set(statuses(result).values()) == {"correct"}, result.problems


def test_huge_output_keeps_the_grader_small(tmp_path):
    # old grader: every cell's output stayed in its notebook (200 kB x 20,000 cells took it to 1 GB). Here 300
    # cells print 200 kB each (60 MB); the grader keeps MAX_NOTEBOOK_OUTPUT_CHARS (2 MB) at most and drops each
    # cell's output once read, so its peak memory grows by far less than the 60 MB printed
    (tmp_path / "small").mkdir()
    (tmp_path / "loud").mkdir()
    small = write_notebook(tmp_path / "small" / "01_memory_wall.ipynb", [IMPORTS])
    loud = write_notebook(tmp_path / "loud" / "01_memory_wall.ipynb", [IMPORTS, *["print('y' * 200_000)"] * 300])
    script = (
        "import sys\n"
        "from distlab.grading import grade\n"
        "grade.grade_notebook(sys.argv[1], timeout=600, cell_timeout=60)\n"
        # VmHWM, this process's own peak: ru_maxrss would also count the pytest process it was forked from
        # (Linux carries the parent's resident size across fork and exec into ru_maxrss)
        "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
    )

    def peak_kb(path) -> int:
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    loud_kb, small_kb = peak_kb(loud), peak_kb(small)
    assert (loud_kb - small_kb) / 1024 < 30, f"the grader grew by {(loud_kb - small_kb) / 1024:.0f} MB"
    assert loud_kb / 1024 < 200, f"the grader peaked at {loud_kb / 1024:.0f} MB"  # the bound


def test_outside_bubblewrap_the_kernel_still_gets_the_student_view_and_an_allow_listed_environment(monkeypatch):
    # old kernel ("container", as Gradescope's autograder runs it): a copy of the grader's environment with the
    # secret, and the real lesson module (its answer key withheld only after import, by the kernel itself)
    monkeypatch.setenv("DISTLAB_VARIANT_SECRET", "s3cret-of-the-instructor")
    code = (
        "import os, distlab.lessons.memory_wall as m\n"
        "answer_x = {'file': m.__file__, 'secret': os.environ.get('DISTLAB_VARIANT_SECRET', ''), "
        "'stub': type(m.q1).__name__}\n"
    )
    found = probe(code, mode="container", audit_hook=True)
    assert found["secret"] == ""
    assert found["stub"] == "QuestionStub"
    assert found["file"].startswith(str(student_view()))
