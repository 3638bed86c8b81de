"""The kernel's sandbox: bubblewrap by allow-list, the user it runs as, and its resource limits.

SandboxWorld is one kernel's world (its private host folder, the fresh unprivileged user id a root
grader gives it, its disk quota); bwrap_prefix() is the bubblewrap command line that builds it and
starter_prefix() adds the starter that sets the limits and becomes that user before the kernel starts.
limits_prefix() caps a kernel that runs without bubblewrap ("container", "trusted"). Which paths exist,
which are writable and why: bwrap_prefix's docstring; distlab.grading.grade says what each mode protects.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .cgroups import KernelCgroups  # still importable from here
from .seccomp import seccomp_prefix, seccomp_program  # still importable from here

__all__ = [
    "SANDBOX_TMP",
    "SANDBOX_WORK",
    "SANDBOX_VIEW",
    "SANDBOX_SUBMISSION",
    "SANDBOX_IPC",
    "SANDBOX_CGROUPS",
    "DEFAULT_INODES",
    "KERNEL_OPEN_FILES",
    "IPC_LIMITS",
    "KernelCgroups",
    "seccomp_program",
    "seccomp_prefix",
    "DEFAULT_DISK_QUOTA",
    "KERNEL_UID_BASE",
    "KERNEL_UID_SPAN",
    "bwrap_available",
    "SandboxWorld",
    "bwrap_env",
    "kernel_uid_for_run",
    "sandbox_env",
    "bwrap_prefix",
    "STARTER",
    "starter_prefix",
    "LIMITER",
    "limits_prefix",
    "kill_user",
]


def bwrap_available() -> bool:
    """True when the bubblewrap program exists and can create the sandbox (with every namespace) here."""
    if not shutil.which("bwrap"):
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="distlab-bwrap-") as base:
            world = SandboxWorld(Path(base), kernel_uid=0)
            done = subprocess.run(
                [*bwrap_prefix(world), world.python, "-I", "-S", "-c", "pass"],
                capture_output=True,
                timeout=20,
                env=bwrap_env(),
            )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


#: inside the sandbox: the private temporary folder (a size-limited tmpfs), the working copy in it, the
#: student view of distlab, and where the submitted file is bound read-only for the starter to copy
SANDBOX_TMP = "/tmp"
SANDBOX_WORK = "/tmp/work"
SANDBOX_VIEW = "/opt/distlab-view"
SANDBOX_SUBMISSION = "/run/distlab/submission.ipynb"
#: inside the sandbox: the folder of the kernel's unix sockets (a tmpfs of SANDBOX_IPC_BYTES, the kernel's user's);
#: the grader reaches them through /proc/<the sandbox's process 1>/root (SandboxWorld.socket_prefix)
SANDBOX_IPC = "/run/distlab/ipc"
SANDBOX_IPC_BYTES = 64 * 2**10
#: size of the kernel's private /tmp: the working copy and every temporary file together (bytes)
DEFAULT_DISK_QUOTA = 256 * 2**20
#: a grader running as root starts each kernel as a fresh user id from this range (never a real account;
#: each run its own, so RLIMIT_NPROC counts only that kernel's processes and threads)
KERNEL_UID_BASE = 0x4000_0000
KERNEL_UID_SPAN = 0x1000_0000


#: inodes (files, folders, links) the private /tmp may hold: an empty file costs no block of the quota but
#: about a kilobyte of kernel memory, so their number is capped too (root grader only: see STARTER)
DEFAULT_INODES = 16_384
#: inside the sandbox: the cgroup files the starter writes "0" to, joining the kernel's cgroups before it execs
SANDBOX_CGROUPS = "/run/distlab/cgroup"
#: files each kernel process may hold open (RLIMIT_NOFILE, soft and hard): ipykernel with numpy and matplotlib holds
#: 63; the default 20,000 x 256 processes was 5 million entries of the host's file table, twice fs.file-max
#: (red team round 2, container/08: 76,000 held by 4 processes). 256 x 256 processes = 65,536 at most
KERNEL_OPEN_FILES = 256
#: the private IPC namespace's limits, set by a root starter before the kernel runs (sysctl name, value): at most 16
#: System V shared memory segments of 16 MiB in all (shmall counts 4 kB pages), 16 message queues of 16 kB, 32
#: semaphore sets of 32. Linux's defaults let one segment pin memory no rlimit counts (container/11)
IPC_LIMITS = (
    ("kernel/shmmax", str(16 * 2**20)),
    ("kernel/shmall", str(16 * 2**20 // 4096)),
    ("kernel/shmmni", "16"),
    ("kernel/msgmnb", "16384"),
    ("kernel/msgmni", "16"),
    ("kernel/sem", "32 1024 32 32"),
)


class SandboxWorld:
    """What one kernel's sandbox is made of: its private host folder `base` and the user it runs as.

    base/ipc holds the connection file (bound read-only into the sandbox at the same path); the kernel's
    unix sockets lie in a tmpfs of the sandbox (SANDBOX_IPC), reached from here through /proc (socket_prefix):
    nothing of the host's disk is writable by the kernel. base/submission.ipynb is the copy the starter puts
    into the working copy. kernel_uid: the user id the kernel runs as (0:
    stay as the grader, when it is not root).
    """

    def __init__(self, base: Path, kernel_uid: int, disk_quota: int = DEFAULT_DISK_QUOTA, cgroups=None):
        from .student_view import student_view

        #: the kernel's KernelCgroups (None or empty: rlimits only)
        self.cgroups = cgroups
        self.base = Path(base)
        self.ipc = self.base / "ipc"
        self.ipc.mkdir(mode=0o700, exist_ok=True)
        self.kernel_uid = int(kernel_uid)
        self.disk_quota = int(disk_quota)
        self.view = student_view()
        self.python = os.path.realpath(sys.executable)
        if self.kernel_uid:
            os.chown(self.ipc, self.kernel_uid, self.kernel_uid)

    def hand_over(self, connection_file: Path) -> None:
        """Let the kernel's user read the connection file (written by the grader with mode 0600)."""
        if self.kernel_uid and connection_file.exists():
            os.chown(connection_file, self.kernel_uid, self.kernel_uid)

    @staticmethod
    def process_one(bwrap_pid: int, wait: float = 20.0) -> int:
        """The sandbox's process 1 (as seen from here): the one child of bubblewrap (process `bwrap_pid`)."""
        import time

        until = time.monotonic() + wait
        while True:
            try:
                with open(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children") as f:
                    children = f.read().split()
            except OSError:
                children = []
            if children:
                return int(children[0])
            if time.monotonic() > until:
                raise RuntimeError("the sandbox did not start (bubblewrap has no process 1)")
            time.sleep(0.02)

    @staticmethod
    def socket_prefix(process_one: int) -> str:
        """The kernel's socket path prefix (jupyter's "ip" for the ipc transport) as seen from here: SANDBOX_IPC
        under the root of the sandbox's process 1 (process_one)."""
        return f"/proc/{process_one}/root{SANDBOX_IPC}/kernel"


def bwrap_env() -> dict:
    """bubblewrap's own environment (it passes none of it on: --clearenv)."""
    return {"PATH": os.defpath, "LANG": "C.UTF-8"}


def kernel_uid_for_run() -> int:
    """A fresh unprivileged user id for one kernel when the grader is root, else 0 (the kernel stays the grader)."""
    return KERNEL_UID_BASE + secrets.randbelow(KERNEL_UID_SPAN) if os.geteuid() == 0 else 0


#: the system libraries' folders, bound read-only (or their links made) in every sandbox
_SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")


def _runtime_binds() -> list[str]:
    """Read-only binds of the Python runtime, the system libraries it links, fonts, and the environment's packages.

    The runtime: its interpreter, standard library and the files of it this process has mapped (libpython),
    never its whole prefix (a distribution's Python has sys.base_prefix /usr: /usr/local, /usr/src and /usr/share
    would come with it); its own site-packages hidden (empty) unless the environment uses them. A virtual environment: its pyvenv.cfg, its python (a link to the
    runtime's) and its site-packages folders, never the folder around them (a venv inside a checkout does
    not bring the checkout). Any distlab package found in them is covered by the student view.
    """
    import site

    args: list[str] = []
    runtime = os.path.realpath(sys.base_prefix)
    for path in _runtime_files(runtime):
        args += ["--ro-bind", path, path]
    for lib in _SYSTEM_LIBS:
        if os.path.islink(lib):
            args += ["--symlink", os.readlink(lib), lib]
        elif os.path.isdir(lib):
            args += ["--ro-bind", lib, lib]
    for shared in ("/usr/share/fonts", "/usr/share/zoneinfo"):
        if os.path.isdir(shared):
            args += ["--ro-bind", shared, shared]
    if os.path.realpath(sys.prefix) != runtime:
        cfg = os.path.join(sys.prefix, "pyvenv.cfg")
        if os.path.isfile(cfg):
            args += ["--ro-bind", cfg, cfg]
    # the environment's python (a link to the runtime's), or python3 -> python3.11 of a runtime used directly
    if os.path.realpath(sys.prefix) != runtime or os.path.realpath(sys.executable) != sys.executable:
        args += ["--symlink", os.path.realpath(sys.executable), sys.executable]
    extra = package_folders()
    sites = [*site.getsitepackages(), *extra]
    ours = dict.fromkeys(os.path.realpath(p) for p in sites)
    for folder in ours:
        if not os.path.isdir(folder):
            continue
        if folder in extra or not _under(folder, runtime):
            args += ["--ro-bind", folder, folder]
    # the runtime's own site-packages (a distlab installed there holds the answer key) are empty folders
    # unless the environment uses them: only the standard library of the runtime is bound
    for folder in dict.fromkeys(os.path.realpath(p) for p in site.getsitepackages([sys.base_prefix])):
        if os.path.isdir(folder) and folder not in ours and _under(folder, runtime):
            args += ["--perms", "0555", "--size", "4096", "--tmpfs", folder]
    for folder in dict.fromkeys(os.path.realpath(p) for p in sites):
        if os.path.isdir(os.path.join(folder, "distlab")):
            args += ["--ro-bind", "{view}/distlab", os.path.join(folder, "distlab")]
    return args


def package_folders() -> list[str]:
    """The folders of installed packages the grader imports from that its Python does not find by itself: the user's
    site-packages (`pip install --user`) and site-packages or dist-packages folders on PYTHONPATH. The sandbox binds
    them read-only (any distlab in them covered by the student view) and puts them on the kernel's PYTHONPATH after
    the view: without them the kernel could not import ipykernel and died before it answered. Other folders on
    PYTHONPATH (a checkout, with solutions/ and tests/) are never bound. Real paths, each once."""
    import site

    own = {os.path.realpath(p) for p in site.getsitepackages()}
    found = [
        os.path.realpath(p)
        for p in sys.path
        if os.path.isabs(p) and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")
    ]
    return [p for p in dict.fromkeys(found) if p not in own and os.path.isdir(p)]


def _runtime_files(runtime: str) -> list[str]:
    """The Python runtime's own files: the interpreter, the standard library (and its extension modules' folder),
    and what of `runtime` this process has mapped (libpython). Real paths, each once, outermost first."""
    import sysconfig

    bases = {"base": sys.base_prefix, "installed_base": sys.base_prefix}
    bases.update(platbase=sys.base_exec_prefix, installed_platbase=sys.base_exec_prefix)
    paths = sysconfig.get_paths(vars=bases)
    found = [getattr(sys, "_base_executable", "") or sys.executable, sys.executable]
    found += [paths["stdlib"], paths["platstdlib"], os.path.join(paths["stdlib"], "lib-dynload")]
    try:
        with open("/proc/self/maps") as maps:
            found += [line.split(None, 5)[5].strip() for line in maps if line.count(" /") and len(line.split()) > 5]
    except OSError:
        pass
    # each file once before resolving it (a library's segments are mapped on several lines: a grader that imported
    # numpy and matplotlib maps hundreds of files on thousands of lines)
    real = sorted({os.path.realpath(p) for p in dict.fromkeys(found) if p and os.path.exists(p)}, key=len)
    kept: list[str] = []
    for path in real:
        if any(_under(path, lib) for lib in _SYSTEM_LIBS):
            continue  # bound with the system libraries
        if _under(path, runtime) and not any(_under(path, k) for k in kept):
            kept.append(path)
    return kept


def sandbox_env(world: SandboxWorld) -> dict:
    """The kernel's whole environment in the sandbox (an allow-list: nothing of the grader's is passed on)."""
    return {
        "PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin",
        "HOME": SANDBOX_WORK,
        "LANG": "C.UTF-8",
        "TMPDIR": SANDBOX_WORK + "/.tmp",
        "IPYTHONDIR": SANDBOX_WORK + "/.ipython",
        "MPLCONFIGDIR": SANDBOX_WORK + "/.matplotlib",
        "MPLBACKEND": "agg",
        "PYTHONPATH": os.pathsep.join([SANDBOX_VIEW, *package_folders()]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


_TAKES_TWO = {"--ro-bind", "--bind", "--dev-bind", "--symlink"}
_TAKES_ONE = {"--dev", "--proc", "--tmpfs", "--dir"}


def _with_folders(mounts: list[str]) -> list[str]:
    """`mounts` with --dir (mode 0755) before each mount for every folder above its mount point not made yet:
    bubblewrap would make them mode 0700 (then the kernel's user could not reach the runtime under /root)."""
    out: list[str] = []
    made: set[str] = {"/"}
    pending: list[str] = []  # --perms / --size: they belong to the next mount, after the folders made for it
    i = 0
    while i < len(mounts):
        option = mounts[i]
        width = 3 if option in _TAKES_TWO else 2 if option in _TAKES_ONE or option in ("--perms", "--size") else 1
        step = mounts[i : i + width]
        if option in ("--perms", "--size"):
            pending += step
            i += width
            continue
        if option in _TAKES_TWO or option in _TAKES_ONE:
            target = step[-1]
            parts = target.strip("/").split("/")[:-1]
            for n in range(1, len(parts) + 1):
                folder = "/" + "/".join(parts[:n])
                if folder not in made:
                    out += ["--perms", "0755", "--dir", folder]
                    made.add(folder)
            if option == "--tmpfs":  # a fresh file system: what was made under it is gone
                made = {f for f in made if not _under(f, target) or f == target}
            made.add(target)
        out += pending + step
        pending = []
        i += width
    return out


def bwrap_prefix(world: SandboxWorld) -> list[str]:
    """bubblewrap by allow-list: an empty root in which only what the kernel needs exists.

    Read-only: the Python runtime (sys.base_prefix), the system libraries, fonts, the environment's
    site-packages (_runtime_binds) and the student view of distlab (student_view). Writable: a private
    /tmp of `world.disk_quota` bytes (tmpfs) holding the working copy, and SANDBOX_IPC (a tmpfs of
    SANDBOX_IPC_BYTES for the kernel's sockets); no folder of the host's disk. /dev minimal, /proc of the kernel's own process namespace; the root itself is then
    remounted read-only. Private process, IPC, network, host-name and cgroup namespaces; a new session; it
    dies with the grader (--die-with-parent, kept by the starter: see STARTER); an environment from an allow-list only (--clearenv, sandbox_env). As root,
    every capability is dropped but the three the starter (STARTER) needs to become the kernel's
    unprivileged user, which it then loses with them (and CAP_SYS_ADMIN, which it uses once to cap the
    inodes of /tmp). /dev holds null, zero, full, random and urandom only. The kernel's cgroup.procs
    files (KernelCgroups) are bound for the starter to join.
    """
    args = [shutil.which("bwrap") or "bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
    # no init of bubblewrap's in the sandbox: the starter is process 1 (filtered, non-dumpable) and the kernel its
    # child. bubblewrap's init has no seccomp filter and runs as the kernel's user (a grader that is not root): the
    # kernel could drive it (ptrace, /proc/1/mem) into a user namespace with every capability. Now every process
    # there carries the starter's filter. (The kernel is not process 1 itself: kill(-1), which ipykernel's
    # interrupt sends to its process group 1, never reaches process 1.)
    args += ["--as-pid-1"]
    for key, value in sandbox_env(world).items():
        args += ["--setenv", key, value]
    view = str(world.view)
    # the private /tmp first: what is bound below it afterwards (a checkout or environment under /tmp, as a CI
    # clone may be) is then bound on top of it, not hidden under it
    mounts = ["--perms", "1777", "--size", str(world.disk_quota), "--tmpfs", SANDBOX_TMP]
    mounts += [a.replace("{view}", view) for a in _runtime_binds()]
    mounts += ["--ro-bind", view, SANDBOX_VIEW]
    # /dev: only the devices a Python program reads, no terminals (/dev/pts, /dev/ptmx: the host's ptys are
    # counted host-wide, kernel.pty.nr) and no /dev/shm
    mounts += ["--perms", "0755", "--size", str(2**20), "--tmpfs", "/dev"]
    for device in ("null", "zero", "full", "random", "urandom"):
        mounts += ["--dev-bind", "/dev/" + device, "/dev/" + device]
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        mounts += ["--symlink", target, "/dev/" + name]
    mounts += ["--symlink", "/proc/self/fd/2", "/dev/stderr", "--proc", "/proc"]
    mounts += ["--ro-bind", str(world.ipc), str(world.ipc)]  # the connection file, read-only
    mounts += ["--perms", "0700", "--size", str(SANDBOX_IPC_BYTES), "--tmpfs", SANDBOX_IPC]
    submission = world.base / "submission.ipynb"
    if submission.exists():
        mounts += ["--ro-bind", str(submission), SANDBOX_SUBMISSION]
    for n, procs in enumerate(world.cgroups.procs if world.cgroups else []):
        mounts += ["--bind", procs, f"{SANDBOX_CGROUPS}/{n}"]
    args += _with_folders(mounts)
    # /dev is a tmpfs of its own: read-only too (device nodes still work), or a kernel running as the grader's
    # user could fill memory through it
    args += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/"]
    # the empty folders over the runtime's own site-packages: read-only too (their owner is the kernel's user when
    # the grader is not root: it could chmod them and write)
    hidden = [mounts[i + 1] for i, a in enumerate(mounts) if a == "--tmpfs"]
    for folder in hidden:
        if folder not in (SANDBOX_TMP, "/dev", SANDBOX_IPC):
            args += ["--remount-ro", folder]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_CHOWN"]
        args += ["--cap-add", "CAP_SYS_ADMIN"]  # the starter's remount of /tmp with an inode limit
    return [*args, "--"]


#: run after the resource limits are set (STARTER, LIMITER): every rlimit's hard limit is lowered to its soft one, so
#: the kernel can raise none. Red team round 7 modes/12: RLIMIT_CORE was soft 0, hard unlimited, so a kernel raised
#: it and dumped core, which a host whose kernel.core_pattern pipes to a handler (systemd-coredump, apport; in a
#: container the host's pattern) hands to that handler, run as root outside every limit; RLIMIT_STACK was soft
#: 8 MiB, hard unlimited (RLIMIT_AS bounds a stack anyway). Nothing the kernel runs raises a soft limit
HARD_IS_SOFT = (
    "for name in [n for n in dir(resource) if n.startswith('RLIMIT_')]:\n"
    "    soft, hard = resource.getrlimit(getattr(resource, name))\n"
    "    if hard != soft:\n"
    "        resource.setrlimit(getattr(resource, name), (soft, soft))\n"
)
#: the sandbox's first process (as root, it holds CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_SYS_ADMIN only):
#: sets the IPC namespace's limits (IPC_LIMITS, root only; through a fresh /proc where bubblewrap's is read-only),
#: joins the kernel's cgroups, remounts /tmp with an inode limit (root only), makes the working copy, copies
#: the submission into it, sets the resource limits, asks to be killed when bubblewrap dies (PR_SET_PDEATHSIG), and
#: forks the kernel, which becomes the kernel's user (losing every capability; bubblewrap has set no_new_privs, so
#: none can come back), installs the seccomp filter (seccomp_program) and execs. Process 1 keeps its user id, so
#: the parent-death signal holds (Linux clears it on a change of user, and bubblewrap, which has dropped its
#: capabilities, may not signal another user: default/12, a killed root grader left the sandbox running), drops
#: every capability, installs the filter, makes itself non-dumpable (its /proc/1/mem closed to the kernel, whose
#: user differs anyway) and stays process 1 of the sandbox (bwrap --as-pid-1), reaping orphans until the kernel
#: exits; when it dies the kernel's whole pid namespace dies with it
STARTER = (
    "import ctypes, os, resource, shutil, sys\n"
    "uid, limits, source, work = int(sys.argv[1]), sys.argv[2:7], sys.argv[7], sys.argv[8]\n"
    "inodes, quota, bpf, groups = int(sys.argv[9]), int(sys.argv[10]), bytes.fromhex(sys.argv[11]), sys.argv[12]\n"
    "ipc = [item.split('=') for item in sys.argv[13].split(',') if item]\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def sysctl(proc):\n"
    "    for name, value in ipc:\n"
    "        with open(proc + '/sys/' + name, 'w') as f:\n"
    "            f.write(value.replace(':', ' '))\n"
    "try:\n"
    "    sysctl('/proc')\n"
    "except OSError:\n"
    "    os.mkdir('/tmp/.proc', 0o700)\n"
    "    if libc.mount(b'proc', b'/tmp/.proc', b'proc', 0x2 | 0x4 | 0x8, None) != 0:\n"
    "        sys.exit('could not set the IPC limits: ' + os.strerror(ctypes.get_errno()))\n"
    "    sysctl('/tmp/.proc')\n"
    "    libc.umount2(b'/tmp/.proc', 2)\n"
    "    os.rmdir('/tmp/.proc')\n"
    "for name in (sorted(os.listdir(groups)) if os.path.isdir(groups) else []):\n"
    "    with open(os.path.join(groups, name), 'w') as f:\n"
    "        f.write('0')\n"
    "if inodes and libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0x20 | 0x2 | 0x4,\n"
    "                         b'size=%d,nr_inodes=%d,mode=1777' % (quota, inodes)) != 0:\n"
    "    sys.exit('could not limit the inodes of /tmp: ' + os.strerror(ctypes.get_errno()))\n"
    "if inodes and libc.mount(b'tmpfs', b'/run/distlab/ipc', b'tmpfs', 0x20 | 0x2 | 0x4 | 0x8,\n"
    "                         b'size=65536,nr_inodes=64,mode=0700') != 0:\n"
    "    sys.exit('could not limit the inodes of the socket folder: ' + os.strerror(ctypes.get_errno()))\n"
    "os.chown('/run/distlab/ipc', uid, uid) if uid else None\n"
    "made = [work + sub for sub in ('', '/.tmp', '/.ipython', '/.matplotlib')]\n"
    "for folder in made:\n"
    "    os.makedirs(folder, mode=0o700, exist_ok=True)\n"
    "if os.path.exists(source):\n"
    "    made.append(shutil.copyfile(source, work + '/submission.ipynb'))\n"
    "for path in reversed(made):\n"
    "    os.chown(path, uid, uid) if uid else None\n"
    "for name, value in zip(('RLIMIT_AS', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_CPU', 'RLIMIT_NOFILE'), limits):\n"
    "    if int(value) > 0:\n"
    "        resource.setrlimit(getattr(resource, name), (int(value), int(value)))\n"
    + HARD_IS_SOFT
    + "class Prog(ctypes.Structure):\n"
    "    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_char_p)]\n"
    "def confine():\n"
    "    prog = Prog(len(bpf) // 8, bpf)\n"
    "    libc.prctl(38, 1, 0, 0, 0)\n"
    "    if bpf and libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:\n"
    "        sys.exit('could not install the seccomp filter: ' + os.strerror(ctypes.get_errno()))\n"
    "libc.prctl(1, 9, 0, 0, 0)\n"
    "kernel = os.fork()\n"
    "if kernel == 0:\n"
    "    if uid:\n"
    "        os.setgroups([])\n"
    "        os.setresgid(uid, uid, uid)\n"
    "        os.setresuid(uid, uid, uid)\n"
    "        if os.getuid() != uid or os.geteuid() != uid:\n"
    "            sys.exit('could not become the kernel user')\n"
    "    confine()\n"
    "    os.umask(0o077)\n"
    "    os.chdir(work)\n"
    "    os.execv(sys.argv[15], sys.argv[15:])\n"
    "class Head(ctypes.Structure):\n"
    "    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]\n"
    "if libc.capset(ctypes.byref(Head(0x20080522, 0)), (ctypes.c_uint32 * 6)()) != 0:\n"
    "    os.kill(kernel, 9)\n"
    "    sys.exit('could not drop the capabilities: ' + os.strerror(ctypes.get_errno()))\n"
    "confine()\n"
    "libc.prctl(4, 0, 0, 0, 0)\n"
    "while True:\n"
    "    try:\n"
    "        pid, status = os.wait()\n"
    "    except ChildProcessError:\n"
    "        os._exit(0)\n"
    "    if pid == kernel:\n"
    "        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)\n"
)


def starter_prefix(
    world: SandboxWorld,
    memory_limit: int | None,
    processes: int | None,
    file_size_limit: int | None,
    cpu_seconds: int | None,
) -> list[str]:
    """bwrap_prefix(world) and the starter: what runs before the kernel's own command line."""
    if processes:
        # a fresh user id runs nothing yet. Staying the grader's user, the kernel runs in bubblewrap's user namespace,
        # where Linux >= 5.14 counts RLIMIT_NPROC from 0 (per namespace and user): the grader's tasks must not be
        # added (24-nonroot-nproc-userns: 256 + 600 of them let the kernel fork 850); older kernels count every
        # task of the user, so there they are
        own_count = world.kernel_uid or _linux_at_least(5, 14)
        nproc = int(processes) + (0 if own_count else _tasks_of_this_user())
    else:
        nproc = 0
    values = [int(memory_limit or 0), nproc, int(file_size_limit or 0), int(cpu_seconds or 0), KERNEL_OPEN_FILES]
    # a root grader sets the limits of the sandbox's IPC namespace (the kernel's user could not)
    ipc = ",".join(f"{name}={value.replace(' ', ':')}" for name, value in IPC_LIMITS) if world.kernel_uid else ""
    return [
        *bwrap_prefix(world),
        world.python,
        "-I",
        "-S",
        "-c",
        STARTER,
        str(world.kernel_uid),
        *map(str, values),
        SANDBOX_SUBMISSION,
        SANDBOX_WORK,
        str(DEFAULT_INODES if world.kernel_uid else 0),
        str(world.disk_quota),
        seccomp_program().hex(),
        SANDBOX_CGROUPS,
        ipc,
        "--",
    ]


#: sets the resource limits of the process, then becomes the rest of its command line (inherited by bwrap and the kernel)
LIMITER = (
    "import os, resource, sys\n"
    "for name, value in zip(('RLIMIT_AS', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_CPU', 'RLIMIT_NOFILE'), sys.argv[1:6]):\n"
    "    if int(value) > 0:\n"
    "        resource.setrlimit(getattr(resource, name), (int(value), int(value)))\n"
    + HARD_IS_SOFT
    + "os.execvp(sys.argv[7], sys.argv[7:])\n"
)


def _linux_at_least(major: int, minor: int) -> bool:
    """Whether this runs on Linux `major`.`minor` or later (platform.release(), e.g. "6.1.0-18-amd64")."""
    import platform
    import re

    found = re.match(r"(\d+)\.(\d+)", platform.release())
    return found is not None and (int(found[1]), int(found[2])) >= (major, minor)


def _tasks_of_this_user() -> int:
    """How many processes and threads this user runs now (RLIMIT_NPROC counts them all)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return count


def limits_prefix(
    memory_limit: int | None, processes: int | None, file_size_limit: int | None, cpu_seconds: int | None
) -> list[str]:
    """A command prefix that caps address space, processes (threads included, beyond this user's current
    ones), file size and CPU seconds of what follows (0 or None: no limit), and its open files (KERNEL_OPEN_FILES)."""
    nproc = _tasks_of_this_user() + int(processes) if processes else 0
    values = [int(memory_limit or 0), nproc, int(file_size_limit or 0), int(cpu_seconds or 0), KERNEL_OPEN_FILES]
    return [sys.executable, "-S", "-c", LIMITER, *map(str, values), "--"]


def kill_user(uid: int) -> int:
    """SIGKILL every process of user `uid` (a kernel's own user id, never a real account); how many there were."""
    killed = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
                    killed += 1
            except OSError:
                pass
    return killed
