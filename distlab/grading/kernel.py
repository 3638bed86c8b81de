"""Running a notebook's cells in a fresh kernel of this Python environment (nbclient), optionally under bubblewrap
(the sandbox itself: distlab.grading.sandbox).

kernel_manager() is the one kernel-spec manager of the package (the tests run notebooks with it
too). run_in_kernel() is the grading run: install the sandbox (kernel_side.install_sandbox), then
every student cell with its time limit, each followed by a private cell that prints the answers
(kernel_side.collect_answers) between nonce markers; it returns the last snapshot read. The kernel's
messages are decoded within bounds (distlab.grading.messages).
"""

from __future__ import annotations

import functools
import inspect
import os
import secrets
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from . import kernel_side
from .kernel_user import (  # the kernel outside bubblewrap: still importable from here
    _chown,
    _hand_to_kernel_user,
    container_kernel_ids,
    kernel_env,
    runtime_packages,
)
from .notebook_client import (  # the Jupyter side: still importable from here
    MAX_NOTEBOOK_OUTPUT_CHARS,
    MAX_OUTPUT_CHARS,
    client_class as _client_class,
    kernel_manager,
)
from .cgroups import kernel_cgroup_name
from .relay import Relay
from .answers import MAX_ANSWER_CHARS, parse_answers
from .messages import (  # the bounded decoding of the kernel's messages: still importable from here
    DROPPED_REPLY_STATUS,
    KEPT_MESSAGES,
    MAX_CONTAINERS,
    MAX_MESSAGE_BYTES,
    MAX_PART_BYTES,
    READ_QUEUE,
    UNREAD_MESSAGE_BYTES,
    grading_session,
    json_containers,
)
from .sandbox import (  # bwrap_available, bwrap_prefix, LIMITER and limits_prefix: still importable from here
    LIMITER,
    SANDBOX_IPC,
    SANDBOX_WORK,
    KernelCgroups,
    SandboxWorld,
    bwrap_available,
    bwrap_env,
    bwrap_prefix,
    kernel_uid_for_run,
    kill_user,
    limits_prefix,
    seccomp_prefix,
    starter_prefix,
)

__all__ = [
    "MAX_OUTPUT_CHARS",
    "MAX_NOTEBOOK_OUTPUT_CHARS",
    "MAX_PROBLEMS",
    "MAX_CELL_PROBLEMS",
    "MAX_MESSAGE_BYTES",
    "KEPT_MESSAGES",
    "MAX_CONTAINERS",
    "MAX_PART_BYTES",
    "json_containers",
    "grading_session",
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

#: seconds past the notebook's time limit after which its kernel is killed whatever the grader's message loop does
#: (the last answers are read within it: the private cell after a cell gets at most 15 s)
HARD_DEADLINE_GRACE = 20.0
#: the largest message a bubblewrap kernel may send, all frames together (a stream's text and four small parts);
#: the relay drops a larger one whole before the grader's zmq receives any of it
MAX_RELAYED_BYTES = MAX_MESSAGE_BYTES + 4 * MAX_PART_BYTES + 2**16
#: messages the grader's shell and iopub sockets queue at most, each (messages.READ_QUEUE; the others queue 1)
RECEIVE_QUEUE = READ_QUEUE
#: at most this many problems are reported for one notebook (report.MAX_PROBLEMS: the rest are counted)
MAX_PROBLEMS = 50
#: at most this many problems of the notebook's own cells (an exception, a cell past its time limit, a message too
#: large) are kept per run, the first of each kind always; the rest are counted in one line. The grader's own notes
#: (the kernel stopped, the time limit, answers unreadable, a folder not removed, the lesson: about 10 at most) so
#: always fit within MAX_PROBLEMS: red team round 7 modes/03 raised in 52 cells and the old cut, the first 49
#: problems kept, hid "the kernel stopped" from every output
MAX_CELL_PROBLEMS = MAX_PROBLEMS - 14
#: reading a file whose path contains one of these is refused in the kernel: the lessons' sources (the
#: expected values' formulas), the solution notebooks, and git's copies of both
SECRET_PARTS = ("/distlab/lessons/", "/solutions/", "/.git/")
#: threads and processes a kernel may add (ipykernel and numpy start a few dozen threads)
DEFAULT_PROCESS_LIMIT = 256
#: the source the kernel compiles: the real functions of kernel_side (install_sandbox and each step it calls)
SANDBOX_SOURCE = "\n\n".join(inspect.getsource(function) for function in kernel_side.SANDBOX)
COLLECT_SOURCE = inspect.getsource(kernel_side.collect_answers)


# --------------------------------------------------------------------------------------
# the private cells
# --------------------------------------------------------------------------------------


def sandbox_cell(
    work: Path, nonce: str, memory_limit: int | None, fsize_limit: int | None, audit_hook: bool = True
) -> str:
    """The private first cell: compile kernel_side.install_sandbox (and its steps) in a private namespace and run it."""
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

    def __init__(self, base: Path, work: Path, sandbox: str, timeout: float, cell_timeout: float, limits: tuple):
        import nbformat.v4 as v4
        import zmq.asyncio

        self.timeout, self.cell_timeout = timeout, cell_timeout
        self.deadline = time.monotonic() + timeout
        self.nb = v4.new_notebook()
        self.world: SandboxWorld | None = None
        self.kernel_ids: tuple[int, int] | None = None
        if sandbox == "bwrap":
            # memory of all the kernel's processes together, and their number: one cgroup each (a root grader)
            cgroups = KernelCgroups(kernel_cgroup_name(), limits[0], limits[1])
            self.world = SandboxWorld(base, kernel_uid_for_run(), cgroups=cgroups)
            # the kernel's own paths; bubblewrap itself starts in the private host folder
            self.work, cwd, self.env = Path(SANDBOX_WORK), base, bwrap_env()
            prefix = starter_prefix(self.world, *limits)
            connection = self.world.ipc / "kernel.json"
        else:
            self.work, cwd, self.env = work, work, kernel_env(work)
            prefix = limits_prefix(*limits)
            connection = base / "kernel.json"
            self.kernel_ids = container_kernel_ids() if sandbox == "container" else None
            if self.kernel_ids is not None:  # the kernel alone runs as the unprivileged user; the grader stays
                connection = _hand_to_kernel_user(base, work, *self.kernel_ids)
                self.env["PYTHONPATH"] = os.pathsep.join([self.env["PYTHONPATH"], *runtime_packages()])
                uid, gid = self.kernel_ids
                prefix += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs"]
                prefix += seccomp_prefix()  # as bubblewrap's kernel: no user namespaces, no ptrace
        # a context of our own: its sockets drop any frame over MAX_MESSAGE_BYTES (UNREAD_MESSAGE_BYTES where the grader
        # reads nothing) before it is read, and queue few messages (a bubblewrap kernel's wait in the relay, then in
        # the kernel: its memory, not the grader's)
        self.context = zmq.asyncio.Context()  # the defaults: sockets the grader does not read (grading_client_class)
        self.context.setsockopt(zmq.MAXMSGSIZE, UNREAD_MESSAGE_BYTES)
        self.context.setsockopt(zmq.RCVHWM, 1)
        self.relay: Relay | None = None
        if self.world is not None:
            before_launch = self.world.hand_over
        elif self.kernel_ids is not None:
            before_launch = functools.partial(_chown, ids=self.kernel_ids)
        else:
            before_launch = None
        km = kernel_manager(
            prefix,
            connection,
            self.context,
            before_launch=before_launch,
            ip=SANDBOX_IPC + "/kernel" if self.world is not None else None,
            after_launch=self._relay if self.world is not None or self.kernel_ids is not None else None,
            debugger=False,
        )
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
            resources={"metadata": {"path": str(cwd)}},
            on_cell_executed=self._executed,
        )

    def _relay(self, km) -> str:
        """The kernel is launched: relay its sockets to sockets of a folder only the grader reaches, every message
        it sends bounded (relay.Relay); returns the prefix the grader connects to. A bubblewrap kernel's sockets are
        seen through /proc; a container kernel's lie in the folder its user owns (base/ipc), where the grader
        would otherwise read them directly (an iopub flood took the grader to 525 MB: container 02). The relay
        connects only to a socket of the kernel's (its user; for bubblewrap, its pid namespace too)."""
        ports = [km.shell_port, km.iopub_port, km.stdin_port, km.hb_port, km.control_port]
        if self.world is not None:  # the peer: the kernel's user, in the sandbox's pid namespace
            init = SandboxWorld.process_one(km.provisioner.process.pid)
            target, folder = SandboxWorld.socket_prefix(init), self.world.base / "relay"
            uid = self.world.kernel_uid or os.getuid()
            self.relay = Relay(folder, target, ports, MAX_RELAYED_BYTES, peer_uid=uid, namespace_of=init)
        else:  # the kernel's unprivileged user (kernel_ids: this is called only with them)
            target, folder = str(km.ip), Path(km.connection_file).parent.parent / "relay"
            peer = self.kernel_ids[0] if self.kernel_ids is not None else None
            self.relay = Relay(folder, target, ports, MAX_RELAYED_BYTES, peer_uid=peer)
        return self.relay.prefix

    #: the last cell's execute_reply, in short: (status, ename, evalue), cut; None when no reply came
    reply: tuple[str, str, str] | None = None

    def _executed(self, cell, cell_index, execute_reply) -> None:
        """nbclient's hook once a cell's execute_reply came: keep its status and exception's name, cut."""
        content = execute_reply.get("content") if isinstance(execute_reply, dict) else None
        if isinstance(content, dict):
            get = content.get
            self.reply = (str(get("status", ""))[:20], str(get("ename", ""))[:200], str(get("evalue", ""))[:300])

    def _cell_limit(self, cell):
        limit = cell.metadata.get("distlab_timeout", self.cell_timeout)
        return max(1, int(min(limit, self.deadline - time.monotonic()) + 0.999))

    @contextmanager
    def started(self):
        """The kernel, running; when the block ends it is shut down and its whole process group killed.

        A watchdog thread kills the kernel HARD_DEADLINE_GRACE seconds after the notebook's time limit, outside the
        message loop: a kernel that keeps sending messages (nbclient looks at a cell's deadline only when none
        arrives) or a message the grader takes long to read cannot keep the notebook running."""
        watchdog = threading.Timer(max(0.0, self.deadline + HARD_DEADLINE_GRACE - time.monotonic()), self.kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            # the kernel's own stdout/stderr (startup warnings) are not the student's output: drop them
            with self.client.setup_kernel(
                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cleanup_kc=True
            ):
                try:
                    yield self
                finally:
                    # killed and reaped here, before nbclient's shutdown (also a kill): jupyter_client then finds it
                    # gone at once, where it polls a process just killed every 0.1 s
                    self._kill_processes()
        finally:
            watchdog.cancel()
            self.stop()

    #: set once the watchdog has killed the kernel at the notebook's hard deadline
    killed_at_deadline = False

    def kill(self) -> None:
        """The watchdog: SIGKILL the kernel's whole process tree (bubblewrap and everything in its namespaces)."""
        self.killed_at_deadline = True
        self._kill_processes()

    def _kill_processes(self) -> None:
        if self.world is not None and self.world.cgroups is not None:
            self.world.cgroups.release_disks()  # a process waiting on a throttled disk request could not die
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
        if self.world is not None and self.world.kernel_uid:
            # until none is left (an exiting process stays listed until its parent reaps it): 2 s at most
            waited = time.monotonic() + 2
            while kill_user(self.world.kernel_uid) and time.monotonic() < waited:
                time.sleep(0.05)
        if self.kernel_ids is not None:
            kill_user(self.kernel_ids[0])

    def stop(self) -> None:
        """Kill what is left of the kernel's process group (it has its own session) and close our sockets."""
        self._kill_processes()
        if self.world is not None and self.world.cgroups is not None:
            self.world.cgroups.remove()
        self.context.destroy(linger=0)
        if self.relay is not None:
            self.relay.close()

    def run(self, source: str, limit: float | None = None, history: bool = True):
        """Execute one cell (the notebook holds only it meanwhile); private cells (history=False) are not
        counted against the notebook's output budget."""
        import nbformat.v4 as v4

        cell = v4.new_code_cell(source)
        if limit is not None:
            cell.metadata["distlab_timeout"] = limit
        self.nb.cells = [cell]
        self.client.private = not history
        self.client.timed_out_cells = set()  # ids of cells already freed may come back: only this one counts
        self.reply = None
        try:
            self.client.execute_cell(cell, 0, store_history=history)
        finally:
            self.nb.cells = []
        return cell

    def timed_out(self, cell) -> bool:
        return id(cell) in self.client.timed_out_cells

    def dropped(self) -> int:
        """How many of the kernel's messages the relay has dropped as too large so far (0 without a relay)."""
        return self.relay.dropped[0] if self.relay is not None else 0

    def replies_dropped(self) -> int:
        """How many execute_replies the grader dropped as too large to decode so far (messages.grading_session)."""
        km = getattr(self.client, "km", None)
        return int(getattr(getattr(km, "session", None), "replies_dropped", [0])[0])


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


_INTERRUPTED = " and was interrupted (an infinite loop?)"


class _Problems:
    """One run's problems: the grader's own notes always (note), its cells' at most MAX_CELL_PROBLEMS (cell; the
    first of each kind always), the rest counted in one line (close)."""

    def __init__(self, problems: list[str]):
        self.problems, self.kept, self.more = problems, 0, 0
        self.kinds: set[str] = set()

    def note(self, text: str) -> None:
        self.problems.append(text)

    def cell(self, kind: str, text: str) -> None:
        if self.kept < MAX_CELL_PROBLEMS or kind not in self.kinds:
            self.problems.append(text)
            self.kept, self.kinds = self.kept + 1, self.kinds | {kind}
        else:
            self.more += 1

    def close(self) -> None:
        if self.more:
            self.problems.append(f"... and {self.more} more problems of code cells (not shown)")


def _deadline_problem(kernel: _Kernel, number: int) -> str:
    return (
        f"the notebook's time limit ({kernel.timeout:g} s) was reached while code cell {number} ran, and its kernel "
        "was stopped; the cells after it did not run"
    )


def _run_student_cell(kernel: _Kernel, number: int, source: str, problems: _Problems):
    """Run one student cell; note in `problems` what went wrong. None when the cells after it cannot run."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    dropped, replies = kernel.dropped(), kernel.replies_dropped()
    try:
        cell = kernel.run(source)
    except (DeadKernelError, CellTimeoutError) as exc:
        if kernel.killed_at_deadline:
            problems.note(_deadline_problem(kernel, number))
        elif isinstance(exc, CellTimeoutError):
            problems.note(
                f"code cell {number} did not finish and could not be interrupted; the cells after it did not run"
            )
        else:
            problems.note(
                f"the kernel stopped (crashed, exited or ran out of memory) in code cell {number} "
                f"(`{first_line(source)}`); the cells after it did not run"
            )
        return None
    err = _error(cell)
    if kernel.timed_out(cell) and kernel.dropped() > dropped:
        # its reply was among them (a 7 MB exception is sent twice, as the error and in the reply): not a loop
        problems.cell(
            "dropped",
            f"code cell {number} (`{first_line(source)}`) sent a message larger than the grader accepts "
            f"({MAX_RELAYED_BYTES // 2**20} MB: an exception or an output that large), which was dropped with the "
            f"cell's result; the cell counts as unfinished after its time limit "
            f"({min(kernel.cell_timeout, kernel.timeout):g} s)",
        )
    elif kernel.timed_out(cell):
        problems.cell(
            "time",
            f"code cell {number} (`{first_line(source)}`) ran longer than its time limit "
            f"({min(kernel.cell_timeout, kernel.timeout):g} s)" + _INTERRUPTED,
        )
    elif err is not None:
        problems.cell(
            "raised",
            f"code cell {number} (`{first_line(source)}`) raised {err.get('ename')}: {str(err.get('evalue'))[:300]}",
        )
    elif kernel.reply is not None and kernel.reply[0] == DROPPED_REPLY_STATUS and kernel.replies_dropped() > replies:
        # its reply came but was too large to decode (an exception message of 64 kB to 8 MB): the cell ended
        problems.cell(
            "dropped",
            f"code cell {number} (`{first_line(source)}`) ended with a reply larger than the grader reads "
            f"({MAX_PART_BYTES // 2**10} kB: an exception message or traceback that long), which was dropped; "
            "whether the cell ran cleanly is unknown",
        )
    elif kernel.reply is None or kernel.reply[0] != "ok":
        problems.cell("raised", _unsent_error(number, source, kernel.reply))
    return cell


def _unsent_error(number: int, source: str, reply: tuple[str, str, str] | None) -> str:
    """The problem of a cell whose error its outputs do not show (red team round 8 13: a cell holding all its 256
    descriptors and raising, ipykernel could not format the traceback, so only the execute_reply said "error";
    round 9 default/08: an IPython post_run_cell hook cleared the cell's outputs after its error was published), or
    that got no reply at all: the grader's own words, whatever the reply names."""
    head = f"code cell {number} (`{first_line(source)}`)"
    if reply is None:
        return f"{head} got no reply from the kernel, so whether it ran cleanly is unknown"
    named = f" (its reply names {reply[1]}: {reply[2]})" if reply[1] else ""
    return f"{head} raised an error its outputs do not show{named}"


_STOP = object()


def _collect(kernel: _Kernel, nonce: str, answer_names: list[str], number: int, timed_out: bool, problems: _Problems):
    """The answers after code cell `number`: a dict, None when unreadable, or _STOP when the kernel is gone."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    try:
        collected = kernel.run(collect_cell(nonce, answer_names), limit=15 if not timed_out else 5, history=False)
    except (DeadKernelError, CellTimeoutError):
        problems.note(
            _deadline_problem(kernel, number)
            if kernel.killed_at_deadline
            else f"the kernel stopped after code cell {number}; the cells after it did not run"
        )
        return _STOP
    answers = parse_answers(_stdout(collected), nonce, set(answer_names))
    collected.outputs = []
    if answers is None and timed_out:
        # the interrupt did not work: say so, not "was interrupted" (18-ignore-interrupt-timelimit)
        for n, text in enumerate(problems.problems):
            if text.startswith(f"code cell {number} (") and text.endswith(_INTERRUPTED):
                problems.problems[n] = text[: -len(_INTERRUPTED)] + " and did not stop when interrupted"
        problems.note(
            f"the kernel did not respond after code cell {number} ran past its time limit, and was stopped; "
            "the cells after it did not run"
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

    `work` lies in a private folder of this run (work.parent), which holds the submitted file, the
    connection file and the kernel's sockets. sandbox: "bwrap" (the kernel runs in SandboxWorld under
    starter_prefix, its working copy in the sandbox's private /tmp; `work` is not used), else the kernel
    runs as is in `work` ("container", "trusted"). The kernel gets resource limits (limits_prefix; CPU seconds: the
    notebook's time limit plus a minute) and is ended, with every process it started, on return.
    """
    nonce = secrets.token_hex(16)
    cpu = int(min(timeout, 10**7)) + 60
    kernel = _Kernel(
        work.parent, work, sandbox, timeout, cell_timeout, (memory_limit, process_limit, file_size_limit, cpu)
    )
    snapshot = None
    unreadable = False
    noted = _Problems(problems)  # 20,000 failing cells make MAX_CELL_PROBLEMS lines and a count, never more
    with kernel.started():
        _install_sandbox(kernel, nonce, memory_limit, file_size_limit, audit_hook)
        try:
            for number, source in enumerate(sources, start=1):
                if not source.strip():
                    continue
                if time.monotonic() >= kernel.deadline:
                    noted.note(
                        f"the notebook's time limit ({timeout:g} s) was reached before code cell {number}; "
                        "it and the cells after it did not run"
                    )
                    break
                cell = _run_student_cell(kernel, number, source, noted)
                if cell is None:
                    break
                timed_out = kernel.timed_out(cell)
                cell.outputs = []  # read: its errors are in problems
                answers = _collect(kernel, nonce, answer_names, number, timed_out, noted)
                if answers is _STOP:
                    break
                if answers is not None:
                    snapshot = answers
                elif not unreadable:
                    unreadable = True
                    noted.note(
                        f"the answers could not be read after code cell {number} "
                        f"(`{first_line(source)}`); the answers read before it count"
                    )
        except Exception as exc:  # noqa: BLE001  whatever else the kernel's messages do to nbclient (red team round 19)
            noted.note(
                f"the grader failed on the kernel's messages in code cell {number} ({type(exc).__name__}); "
                "the cells after it did not run, and the answers read before it count"
            )
        finally:
            noted.close()
    return snapshot
