"""One kernel's cgroups (v1 memory, pids and blkio), made by a root grader under its own and removed afterwards: they
cap all of the kernel's processes together (distlab.grading.sandbox's starter joins them before the kernel starts).
"""

from __future__ import annotations

import os
import secrets
import time

__all__ = [
    "CGROUP_ROOT",
    "KERNEL_DISK_BYTES_PER_S",
    "KERNEL_DISK_READS_PER_S",
    "KERNEL_DISK_WRITES_PER_S",
    "KERNEL_TCP_BUFFER_BYTES",
    "KernelCgroups",
    "kernel_cgroup_name",
    "memory_hierarchy",
    "sweep_abandoned",
    "sweep_hierarchy",
]

#: cgroup v1 hierarchies a root grader makes a cgroup in per kernel (memory and memory+swap of all its
#: processes together; its number of processes and threads)
CGROUP_ROOT = "/sys/fs/cgroup"
#: every kernel cgroup's name starts so; then the grader's pid, its start time (clock ticks after boot, /proc's
#: field 22) and a random part
PREFIX = "distlab-kernel-"
#: a cgroup named the old way (PREFIX + 16 hex digits: no grader named) is taken as abandoned after this long
OLD_NAME_AFTER_S = 3600
#: a kernel cgroup is removed by a sweep only once it is empty and its folder is at least this old (its mtime), whatever
#: its name says: a grader makes it, then starts bubblewrap, whose starter joins it within the kernel's startup
#: timeout (120 s), so an empty one younger than this may be a live grader's that its kernel is about to join. The
#: name alone misjudged: red team round 7 modes/08, a grader in another pid namespace names its cgroups with its own
#: pids (distlab-kernel-1-...), which another grader looked up in its own /proc and removed while still empty
MIN_SWEEP_AGE_S = 3600
#: bytes of TCP socket buffers all of a kernel's processes may hold together (cgroup v1
#: memory.kmem.tcp.limit_in_bytes, set where the file exists): v1 charges them to no other memory limit, and only
#: once this is set (red team round 7 default/02 queued 400 MiB in loopback TCP while its memory cgroup counted
#: 66 MiB). The kernel's own inet socket is libzmq's IOPub pipe (ipykernel binds it on 127.0.0.1); its connections to
#: the grader are unix sockets. So a kernel's memory is at most its memory limit plus this
KERNEL_TCP_BUFFER_BYTES = 64 * 2**20
#: what all of a kernel's processes together may ask of each disk of the host, per second (cgroup v1 blkio throttling,
#: one line per whole disk of /sys/block): bytes read or written, read requests, write requests. Nothing it can write
#: is on a disk (its folders are tmpfs), and nothing else limited its disk use: red team round 11 default/07 read
#: 20,596 MiB of numpy's libraries with O_DIRECT in 20 s (1 GB/s of the host's disk, past the page cache that the
#: memory cgroup counts), default/06 made 12,000 disk cache flushes a second with sync() (ext4 sends one per call,
#: dirty or not). A cold start (numpy, matplotlib: about 150 MB read in large requests) takes about 2 s more; a warm one
#: reads nothing
KERNEL_DISK_BYTES_PER_S = 64 * 2**20
KERNEL_DISK_READS_PER_S = 1000
KERNEL_DISK_WRITES_PER_S = 100
#: how deep below a hierarchy's root, and through how many folders at most, sweep_hierarchy looks
SWEEP_DEPTH, SWEEP_FOLDERS = 8, 20000
#: the hierarchies this grader process has swept (once each: a class run starts many kernels)
_SWEPT: set[str] = set()


def _start_time(pid: int) -> str | None:
    """Process `pid`'s start time (field 22 of /proc/<pid>/stat), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def kernel_cgroup_name() -> str:
    """A fresh kernel cgroup's name, naming this grader (pid and start time: a later grader can tell it is gone)."""
    return f"{PREFIX}{os.getpid()}-{_start_time(os.getpid())}-{secrets.token_hex(4)}"


def _abandoned(entry: os.DirEntry) -> bool:
    """Whether this kernel cgroup may be removed: it is empty (no process in its cgroup.procs; rmdir refuses a
    cgroup with one anyway) and its folder is over MIN_SWEEP_AGE_S old, and its name does not name a live grader
    (its pid, looked up in this grader's /proc, runs no process started then; an old name, PREFIX + 16 hex digits,
    names none). The first two hold whatever the name says and whichever pid namespace the grader that made it ran
    in (red team round 7 modes/08); the name spares a live grader's cgroup on this host a little longer."""
    try:
        age = time.time() - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return False
    try:
        with open(os.path.join(entry.path, "cgroup.procs")) as f:
            empty = not f.read(64).strip()
    except FileNotFoundError:
        empty = True  # no cgroup.procs: a plain folder (rmdir removes it only if empty)
    except OSError:
        return False
    if not empty or age < MIN_SWEEP_AGE_S:
        return False
    parts = entry.name[len(PREFIX) :].split("-")
    if len(parts) == 3 and parts[0].isdigit():
        return _start_time(int(parts[0])) != parts[1]
    return len(parts) == 1 and len(parts[0]) == 16 and age > OLD_NAME_AFTER_S


def sweep_abandoned(parent: str) -> int:
    """Remove the kernel cgroups under `parent` whose grader is gone (a root grader killed with SIGKILL cannot remove
    its own: red team round 2 saw about 20 left); rmdir removes only an empty cgroup, so one whose processes still
    run stays. Returns how many were removed."""
    removed = 0
    try:
        with os.scandir(parent) as entries:
            for entry in entries:
                if entry.name.startswith(PREFIX) and entry.is_dir(follow_symlinks=False) and _abandoned(entry):
                    try:
                        os.rmdir(entry.path)
                        removed += 1
                    except OSError:
                        pass
    except OSError:
        pass
    return removed


def sweep_hierarchy(root: str) -> int:
    """sweep_abandoned in every folder of the hierarchy under `root` (at most SWEEP_DEPTH deep and SWEEP_FOLDERS
    folders; a kernel cgroup's own folder is not entered): a grader killed while it ran in another cgroup (another
    login session's, on a course server) left its kernel's cgroups there, where a later grader's sweep of its own
    cgroup never looked (red team round 5 class/08). Returns how many were removed."""
    removed, seen, todo = 0, 0, [(root, 0)]
    while todo and seen < SWEEP_FOLDERS:
        folder, depth = todo.pop()
        seen += 1
        removed += sweep_abandoned(folder)
        if depth >= SWEEP_DEPTH:
            continue
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not entry.name.startswith(PREFIX) and entry.is_dir(follow_symlinks=False):
                        todo.append((entry.path, depth + 1))
        except OSError:
            pass
    return removed


#: one cgroup file's setting: a number, a list of lines (blkio: one per disk), or None (not set)
Limit = int | list[str] | None


def _disk_limits() -> list[tuple[str, Limit]]:
    """The blkio throttle files and their lines ("major:minor value", one per whole disk of /sys/block): the KERNEL_DISK_*
    limits on every disk of this machine; [] where there is no /sys/block."""
    try:
        names = sorted(os.listdir("/sys/block"))
    except OSError:
        return []
    disks = []
    for name in names:
        try:
            with open(os.path.join("/sys/block", name, "dev")) as f:
                disks.append(f.read().strip())
        except OSError:
            continue
    limits = [
        ("read_bps_device", KERNEL_DISK_BYTES_PER_S),
        ("write_bps_device", KERNEL_DISK_BYTES_PER_S),
        ("read_iops_device", KERNEL_DISK_READS_PER_S),
        ("write_iops_device", KERNEL_DISK_WRITES_PER_S),
    ]
    return (
        [(f"blkio.throttle.{file}", [f"{disk} {value}" for disk in disks]) for file, value in limits] if disks else []
    )


def _write_limit(path: str, value: Limit) -> None:
    """Write one limit: a number, or (blkio) each line of a list, one write each; OSError when none was taken."""
    if value is None:
        return
    if not isinstance(value, list):
        with open(path, "w") as f:
            f.write(str(int(value)))
        return
    taken = 0
    for line in value:  # a disk this Linux cannot throttle (or one gone since) is left out, the others kept
        try:
            with open(path, "w") as f:
                f.write(line)
            taken += 1
        except OSError:
            continue
    if not taken:
        raise OSError(f"{path}: no disk could be limited")


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the v1 hierarchy of `controller` (None: no such hierarchy)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                if controller in names.split(","):
                    return path
    except OSError:
        return None
    return None


def _own_folder(controller: str) -> str | None:
    """This process's cgroup folder in the v1 hierarchy of `controller` (None: no such hierarchy)."""
    own = _own_cgroup(controller)
    return None if own is None else os.path.join(CGROUP_ROOT, controller, own.lstrip("/"))


def memory_hierarchy() -> str | None:
    """The folder of this process's cgroup in the v1 memory hierarchy, where a root grader makes each kernel's memory
    cgroup; None where there is none to make one in (a cgroup v2-only host, as most Linux distributions since 2021
    mount, or a v1 hierarchy this process cannot write): there the kernel's processes have their rlimits only, and
    `distlab grade` says so (instructor/grading-threat-model.md)."""
    folder = _own_folder("memory")
    return folder if folder is not None and os.path.isdir(folder) and os.access(folder, os.W_OK) else None


class KernelCgroups:
    """One kernel's cgroups (v1 memory, pids and blkio, made under the grader's own), removed by remove().

    memory.limit_in_bytes (and memory.memsw.limit_in_bytes where swap is accounted) caps the memory of
    every process of the kernel together, where RLIMIT_AS caps each one, and memory.kmem.tcp.limit_in_bytes
    their TCP socket buffers (KERNEL_TCP_BUFFER_BYTES, which v1 counts apart); pids.max caps its processes and
    threads; blkio's throttle files its reads, writes and cache flushes on every disk (KERNEL_DISK_*). `procs`
    lists the cgroup.procs files the starter joins. Empty where no cgroup could be made (not root, no writable v1
    hierarchy): the kernel then has its rlimits only.
    """

    def __init__(self, name: str, memory_limit: int | None, processes: int | None):
        self.folders: list[str] = []
        self.procs: list[str] = []
        #: the blkio throttle files set, each with its disks (release_disks lifts them)
        self.throttles: list[tuple[str, list[str]]] = []
        settings: dict[str, list[tuple[str, Limit]]] = {
            "memory": [
                ("memory.limit_in_bytes", memory_limit),
                ("memory.memsw.limit_in_bytes", memory_limit),
                ("memory.kmem.tcp.limit_in_bytes", KERNEL_TCP_BUFFER_BYTES if memory_limit else None),
            ],
            "pids": [("pids.max", processes)],
            "blkio": _disk_limits(),
        }
        if os.geteuid() != 0:
            return
        for controller, values in settings.items():
            if not any(v for _, v in values):
                continue
            parent = _own_folder(controller)
            if parent is None:
                continue
            if controller not in _SWEPT:
                _SWEPT.add(controller)
                sweep_hierarchy(os.path.join(CGROUP_ROOT, controller))
            folder = os.path.join(parent, name)
            try:
                os.mkdir(folder, 0o755)
            except OSError:
                continue
            self.folders.append(folder)
            try:
                for n, (file, value) in enumerate(values):
                    path = os.path.join(folder, file)
                    if value and (os.path.exists(path) or n == 0):
                        try:
                            _write_limit(path, value)
                            if isinstance(value, list):
                                self.throttles.append((path, [line.split()[0] for line in value]))
                        except OSError:
                            if n == 0:
                                raise
                            # an optional limit this Linux does not take (memory+swap not accounted): the others
            except OSError:
                continue  # the limit could not be set: the folder is removed, the kernel does not join it
            self.procs.append(os.path.join(folder, "cgroup.procs"))

    def release_disks(self) -> None:
        """Lift the kernel's disk limits (before it is killed): a process waiting on a throttled request cannot die until
        the request is served, so under the limits a kernel that queued its memory limit of direct reads (16 threads of
        414 MiB each) lived 100 s past its grading; lifted, the queue drains at the disk's speed."""
        for path, disks in self.throttles:
            for disk in disks:
                try:
                    with open(path, "w") as f:
                        f.write(f"{disk} 0")  # 0: no limit (the rule is removed)
                except OSError:
                    continue
        self.throttles = []

    def remove(self) -> None:
        """Remove the kernel's cgroups (once its processes are gone; a few tries while they exit)."""
        import time

        self.release_disks()
        for folder in self.folders:
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        self.folders = []
