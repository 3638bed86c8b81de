"""Running a notebook's cells in a fresh kernel of this Python environment (nbclient), optionally under bubblewrap.

kernel_manager() is the one kernel-spec manager of the package (the tests run notebooks with it
too). run_in_kernel() is the grading run: install the sandbox (kernel_side.install_sandbox), then
every student cell with its time limit, each followed by a private cell that prints the answers
(kernel_side.collect_answers) between nonce markers; it returns the last snapshot read.
"""

from __future__ import annotations

import functools
import inspect
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from . import kernel_side
from .answers import MAX_ANSWER_CHARS, parse_answers

__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_MESSAGE_BYTES",
    "SECRET_PARTS",
    "DEFAULT_PROCESS_LIMIT",
    "SANDBOX_SOURCE",
    "COLLECT_SOURCE",
    "bwrap_available",
    "bwrap_prefix",
    "LIMITER",
    "limits_prefix",
    "kernel_manager",
    "kernel_env",
    "sandbox_cell",
    "collect_cell",
    "first_line",
    "run_in_kernel",
]

#: per cell, at most this much output is kept in the grading process (a print loop cannot fill memory)
MAX_OUTPUT_CHARS = 200_000
#: a message from the kernel larger than this is dropped by zmq before it is read (print('y' * 10**9))
MAX_MESSAGE_BYTES = 8 * 2**20
#: reading a file whose path contains one of these is refused in the kernel: the lessons' sources (the
#: expected values' formulas), the solution notebooks, and git's copies of both
SECRET_PARTS = ("/distlab/lessons/", "/solutions/", "/.git/")
#: threads and processes a kernel may add (ipykernel and numpy start a few dozen threads)
DEFAULT_PROCESS_LIMIT = 256
#: the source the kernel compiles: the real functions of kernel_side
SANDBOX_SOURCE = inspect.getsource(kernel_side.install_sandbox)
COLLECT_SOURCE = inspect.getsource(kernel_side.collect_answers)


# --------------------------------------------------------------------------------------
# bubblewrap and the kernel
# --------------------------------------------------------------------------------------


def bwrap_available() -> bool:
    """True when the bubblewrap program exists and can create the sandbox (with every namespace) here."""
    if not shutil.which("bwrap"):
        return False
    try:
        with tempfile.TemporaryDirectory(prefix="distlab-bwrap-") as base:
            work = Path(base) / "work"
            work.mkdir()
            done = subprocess.run([*bwrap_prefix(work, Path(base)), "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _needed_paths() -> list[str]:
    """The folders the kernel must read: the interpreter, its environment, and where distlab and sys.path live."""
    import distlab

    found = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(os.path.dirname(os.path.abspath(distlab.__file__))),
        *(p for p in sys.path if p),
        *os.environ.get("PYTHONPATH", "").split(os.pathsep),
    ]
    out = []
    for p in found:
        p = os.path.realpath(p) if p else ""
        if p and os.path.isdir(p) and p not in out:
            out.append(p)
    return out


def bwrap_prefix(work: Path, base: Path | None = None) -> list[str]:
    """bubblewrap: the whole file system read-only, no network, the temporary folders private, `base` writable.

    Private process, IPC, network and host-name namespaces: the kernel sees no other process
    (it cannot reach the host's writable root through /proc/<pid>/root, signal the grader or
    share its memory) and has no network (the grader talks to it over unix sockets in `base`,
    jupyter's "ipc" transport). The system temporary folders are empty tmpfs, so a kernel
    cannot see another grading run's folder, connection file or sockets; only `base` (this
    run's private folder, holding `work`) is bound back, plus the interpreter, its environment
    and distlab when they live under a temporary folder. A new session (no terminal to inject
    keystrokes into) and no capabilities.
    """
    base = work if base is None else base
    hidden = []
    for folder in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}:
        real = os.path.realpath(folder)
        if os.path.isdir(real) and real != "/" and real not in hidden:
            hidden.append(real)
    args = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev"]
    for folder in sorted(hidden, key=len):
        args += ["--tmpfs", folder]
    for needed in _needed_paths():
        if any(_under(needed, h) for h in hidden) and not _under(needed, str(base)):
            args += ["--ro-bind", needed, needed]
    return [
        *args,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--proc",
        "/proc",
        "--bind",
        str(base),
        str(base),
        "--chdir",
        str(work),
        "--new-session",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        # in its own process namespace the kernel's parent is pid 1, which ipykernel's parent
        # poller takes for "the parent died": no poller (--die-with-parent does its job)
        "--unsetenv",
        "JPY_PARENT_PID",
    ]


#: sets the resource limits of the process, then becomes the rest of its command line (inherited by bwrap and the kernel)
LIMITER = (
    "import os, resource, sys\n"
    "for name, value in zip(('RLIMIT_AS', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_CPU'), sys.argv[1:5]):\n"
    "    if int(value) > 0:\n"
    "        resource.setrlimit(getattr(resource, name), (int(value), int(value)))\n"
    "os.execvp(sys.argv[6], sys.argv[6:])\n"
)


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
    ones), file size and CPU seconds of what follows (0 or None: no limit)."""
    nproc = _tasks_of_this_user() + int(processes) if processes else 0
    values = [int(memory_limit or 0), nproc, int(file_size_limit or 0), int(cpu_seconds or 0)]
    return [sys.executable, "-S", "-c", LIMITER, *map(str, values), "--"]


def kernel_manager(argv_prefix=(), connection_file: Path | None = None, context=None):
    """An AsyncKernelManager whose every kernel name is ipykernel on this interpreter, after `argv_prefix`.

    (As nbval's --nbval-current-env: the kernel runs in this environment, whatever the
    notebook's kernelspec says.) argv_prefix: e.g. bwrap_prefix(work). With a connection_file,
    the kernel listens on unix sockets next to it (jupyter's "ipc" transport: no network, and
    only who can reach that private folder can connect); context: the zmq context to use.
    """
    import ipykernel.kernelspec
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    prefix = list(argv_prefix)

    class GradingKernels(KernelSpecManager):
        """Every kernel name resolves to ipykernel on this interpreter, optionally under bubblewrap."""

        def get_kernel_spec(self, kernel_name):
            spec = ipykernel.kernelspec.get_kernel_dict()
            spec["argv"] = [*prefix, *spec["argv"]]
            # interrupt by message: the kernel signals itself. A SIGINT sent from outside would also
            # reach bubblewrap, which would die and take the kernel with it.
            spec["interrupt_mode"] = "message"
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **spec)

    extra = (
        {}
        if connection_file is None
        else {"connection_file": str(connection_file), "transport": "ipc", "ip": str(connection_file.parent / "kernel")}
    )
    if context is not None:
        extra["context"] = context
    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=GradingKernels(), **extra)


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

                outs.append(
                    new_output(
                        "error",
                        ename=str(content.get("ename", "Error"))[:200],
                        evalue=str(content.get("evalue", ""))[:1000],
                        traceback=[],
                    )
                )
            return None

    return GradingClient


def kernel_env(work: Path) -> dict:
    """The kernel's environment: this one, with its temporary and IPython folders inside the working copy."""
    env = dict(os.environ)
    env.update(
        {
            "TMPDIR": str(work / ".tmp"),
            "IPYTHONDIR": str(work / ".ipython"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    env.pop("PYTHONSTARTUP", None)
    return env


# --------------------------------------------------------------------------------------
# the private cells
# --------------------------------------------------------------------------------------


def sandbox_cell(
    work: Path, nonce: str, memory_limit: int | None, fsize_limit: int | None, audit_hook: bool = True
) -> str:
    """The private first cell: compile kernel_side.install_sandbox in a private namespace and run it."""
    args = repr(
        [
            [str(work)],
            ["/dev/null"],
            int(memory_limit or 0),
            int(fsize_limit or 0),
            nonce,
            bool(audit_hook),
            list(SECRET_PARTS),
            True,
            MAX_OUTPUT_CHARS,
        ]
    )
    return (
        f"exec(compile({SANDBOX_SOURCE!r}, '<distlab-grading-sandbox>', 'exec'), __distlab_ns := {{}})\n"
        f"__distlab_ns['install_sandbox'](*{args})\n"
        f"del __distlab_ns"
    )


def collect_cell(nonce: str, names: list[str]) -> str:
    """The private cell that prints the answers `names` (answer_q1, ...) between nonce markers.

    Each answer gets an equal share of the output the grader keeps per cell, so the snapshot
    always arrives whole; a larger answer arrives as "too large".
    """
    budget = (MAX_OUTPUT_CHARS - 2_000) // max(1, len(names)) - 100
    return (
        f"exec(compile({COLLECT_SOURCE!r}, '<distlab-grading>', 'exec'), __distlab_ns := {{}})\n"
        f"__distlab_ns['collect_answers'](globals(), {nonce!r}, {names!r}, {MAX_ANSWER_CHARS}, {budget})\n"
        f"del __distlab_ns"
    )


# --------------------------------------------------------------------------------------
# one grading run
# --------------------------------------------------------------------------------------


def first_line(source: str) -> str:
    """The first line of code of a cell (comments skipped), at most 60 characters: names the cell in problems."""
    for line in source.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            line = line.strip()
            return line if len(line) <= 60 else line[:57] + "..."
    return ""


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def _error(cell):
    return next((o for o in cell.outputs if o.get("output_type") == "error"), None)


class _Kernel:
    """One kernel and the notebook only the grader sees; each cell gets min(its limit, the time left)."""

    def __init__(self, work: Path, sandbox: str, timeout: float, cell_timeout: float, limits: list[str]):
        import nbformat.v4 as v4
        import zmq.asyncio

        self.work, self.timeout, self.cell_timeout = work, timeout, cell_timeout
        self.deadline = time.monotonic() + timeout
        self.nb = v4.new_notebook()
        prefix = [*limits, *(bwrap_prefix(work, work.parent) if sandbox == "bwrap" else [])]
        # a context of our own: its sockets drop any message over MAX_MESSAGE_BYTES before it is read
        self.context = zmq.asyncio.Context()
        self.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        km = kernel_manager(prefix, work.parent / "kernel.json", self.context)
        km.client = functools.partial(km.client, context=self.context)  # the client's sockets too
        self.client = _client_class()(
            self.nb,
            km=km,
            timeout_func=self._cell_limit,
            allow_errors=True,
            interrupt_on_timeout=True,
            error_on_timeout={"ename": "TimeoutError", "evalue": "cell time limit", "traceback": []},
            store_widget_state=False,
            startup_timeout=120,
            iopub_timeout=2,
            raise_on_iopub_timeout=False,
            shutdown_kernel="immediate",
            record_timing=False,
            resources={"metadata": {"path": str(work)}},
        )

    def _cell_limit(self, cell):
        limit = cell.metadata.get("distlab_timeout", self.cell_timeout)
        return max(1, int(min(limit, self.deadline - time.monotonic()) + 0.999))

    @contextmanager
    def started(self):
        """The kernel, running; when the block ends it is shut down and its whole process group killed."""
        try:
            # the kernel's own stdout/stderr (startup warnings) are not the student's output: drop them
            with self.client.setup_kernel(
                env=kernel_env(self.work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cleanup_kc=True
            ):
                yield self
        finally:
            self.stop()

    def stop(self) -> None:
        """Kill what is left of the kernel's process group (it has its own session) and close our sockets."""
        km = self.client.km
        provisioner = getattr(km, "provisioner", None) if km is not None else None
        group = getattr(provisioner, "pgid", None)
        process = getattr(provisioner, "process", None)
        if group:
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
        if process is not None:
            try:
                process.kill()
            except OSError:
                pass
            try:
                process.wait(timeout=10)
            except Exception:
                pass
        self.context.destroy(linger=0)

    def run(self, source: str, limit: float | None = None, history: bool = True):
        import nbformat.v4 as v4

        cell = v4.new_code_cell(source)
        if limit is not None:
            cell.metadata["distlab_timeout"] = limit
        self.nb.cells.append(cell)
        self.client.execute_cell(cell, len(self.nb.cells) - 1, store_history=history)
        return cell

    def timed_out(self, cell) -> bool:
        return id(cell) in self.client.timed_out_cells


def _install_sandbox(kernel: _Kernel, nonce: str, memory_limit, file_size_limit, audit_hook: bool) -> None:
    boot = kernel.run(
        sandbox_cell(kernel.work, nonce, memory_limit, file_size_limit, audit_hook), limit=120, history=False
    )
    if f"DISTLAB-SANDBOX-READY-{nonce}" not in _stdout(boot):
        err = _error(boot)
        raise RuntimeError(
            "the grading sandbox could not be installed in the kernel"
            + (f": {err['ename']}: {err['evalue']}" if err else "")
        )


def _run_student_cell(kernel: _Kernel, number: int, source: str, problems: list[str]):
    """Run one student cell; note in `problems` what went wrong. None when the cells after it cannot run."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    try:
        cell = kernel.run(source)
    except DeadKernelError:
        problems.append(
            f"the kernel stopped (crashed, exited or ran out of memory) in code cell {number} "
            f"(`{first_line(source)}`); the cells after it did not run"
        )
        return None
    except CellTimeoutError:
        problems.append(
            f"code cell {number} did not finish and could not be interrupted; the cells after it did not run"
        )
        return None
    err = _error(cell)
    if kernel.timed_out(cell):
        problems.append(
            f"code cell {number} (`{first_line(source)}`) ran longer than its time limit "
            f"({min(kernel.cell_timeout, kernel.timeout):g} s) and was "
            "interrupted (an infinite loop?)"
        )
    elif err is not None:
        problems.append(
            f"code cell {number} (`{first_line(source)}`) raised {err.get('ename')}: {str(err.get('evalue'))[:300]}"
        )
    return cell


_STOP = object()


def _collect(kernel: _Kernel, nonce: str, answer_names: list[str], number: int, timed_out: bool, problems: list[str]):
    """The answers after code cell `number`: a dict, None when unreadable, or _STOP when the kernel is gone."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    try:
        collected = kernel.run(collect_cell(nonce, answer_names), limit=15 if not timed_out else 5, history=False)
    except (DeadKernelError, CellTimeoutError):
        problems.append(f"the kernel stopped after code cell {number}; the cells after it did not run")
        return _STOP
    answers = parse_answers(_stdout(collected), nonce)
    if answers is None and timed_out:
        problems.append(
            f"the kernel did not respond after code cell {number} was interrupted; the cells after it did not run"
        )
        return _STOP
    return answers


def run_in_kernel(
    sources: list[str],
    work: Path,
    *,
    answer_names: list[str],
    timeout: float,
    cell_timeout: float,
    sandbox: str,
    memory_limit: int | None,
    file_size_limit: int | None,
    problems: list[str],
    audit_hook: bool = True,
    process_limit: int | None = DEFAULT_PROCESS_LIMIT,
) -> dict | None:
    """Execute the student's cells; return the last answer snapshot (None if none could be read).

    `work` lies in a private folder of this run (work.parent), which holds the connection file and
    the kernel's sockets. sandbox: "bwrap" (run under bwrap_prefix), else the kernel runs as is
    ("container", "trusted"). The kernel gets resource limits (limits_prefix; CPU seconds: the
    notebook's time limit plus a minute) and is ended, with every process it started, on return.
    """
    nonce = secrets.token_hex(16)
    cpu = int(min(timeout, 10**7)) + 60
    kernel = _Kernel(
        work, sandbox, timeout, cell_timeout, limits_prefix(memory_limit, process_limit, file_size_limit, cpu)
    )
    snapshot = None
    unreadable = False
    with kernel.started():
        _install_sandbox(kernel, nonce, memory_limit, file_size_limit, audit_hook)
        for number, source in enumerate(sources, start=1):
            if not source.strip():
                continue
            if time.monotonic() >= kernel.deadline:
                problems.append(
                    f"the notebook's time limit ({timeout:g} s) was reached before code cell {number}; "
                    "it and the cells after it did not run"
                )
                break
            cell = _run_student_cell(kernel, number, source, problems)
            if cell is None:
                break
            answers = _collect(kernel, nonce, answer_names, number, kernel.timed_out(cell), problems)
            if answers is _STOP:
                break
            if answers is not None:
                snapshot = answers
            elif not unreadable:
                unreadable = True
                problems.append(
                    f"the answers could not be read after code cell {number} "
                    f"(`{first_line(source)}`); the answers read before it count"
                )
    return snapshot
