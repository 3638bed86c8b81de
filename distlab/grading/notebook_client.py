"""The grading run's Jupyter side: the one kernel-spec manager of the package (ipykernel on this interpreter,
optionally after the sandbox's command prefix) and the notebook client that keeps each cell's output within
budgets. Used by distlab.grading.kernel (the grading run) and the tests that run notebooks.
"""

from __future__ import annotations

from pathlib import Path

from .messages import grading_client_class, grading_session

__all__ = ["MAX_OUTPUT_CHARS", "MAX_NOTEBOOK_OUTPUT_CHARS", "kernel_manager", "client_class"]

#: per cell, at most this much output is kept in the grading process (a print loop cannot fill memory)
MAX_OUTPUT_CHARS = 200_000
#: per notebook, at most this much student output is kept in the grading process (20,000 cells printing
#: 200 kB each keep 2 MB, not 4 GB); a cell's output is dropped as soon as its errors and answers are read
MAX_NOTEBOOK_OUTPUT_CHARS = 2_000_000
#: `python -m ipykernel_launcher` as a grading kernel runs it: with debugpy marked absent, so ipykernel starts without
#: its debugger (ipykernel.debugger imports debugpy when it can: 0.07 s of the kernel's 0.24 s of CPU to its first
#: reply here). Nothing grades through a debugger, and a graded notebook's `import debugpy` fails.
WITHOUT_DEBUGGER = (
    "import runpy, sys; sys.modules['debugpy'] = None; "
    "runpy.run_module('ipykernel_launcher', run_name='__main__', alter_sys=True)"
)


def kernel_manager(
    argv_prefix=(),
    connection_file: Path | None = None,
    context=None,
    before_launch=None,
    ip=None,
    after_launch=None,
    debugger: bool = True,
):
    """An AsyncKernelManager whose every kernel name is ipykernel on this interpreter, after `argv_prefix`.

    (As nbval's --nbval-current-env: the kernel runs in this environment, whatever the
    notebook's kernelspec says.) argv_prefix: e.g. bwrap_prefix(work). With a connection_file,
    the kernel listens on unix sockets next to it (jupyter's "ipc" transport: no network, and
    only who can reach that private folder can connect); context: the zmq context to use;
    before_launch(connection_file): called once the connection file is written, before the kernel starts.
    ip: the sockets' path prefix the kernel binds (default: beside the connection file); after_launch(the kernel
    manager, launched): returns the prefix the grader connects to (the sandbox's sockets seen from here).
    debugger=False (a grading kernel): ipykernel starts without its debugger (WITHOUT_DEBUGGER).
    """
    import ipykernel.kernelspec
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    prefix = list(argv_prefix)

    class GradingKernels(KernelSpecManager):
        """Every kernel name resolves to ipykernel on this interpreter, optionally under bubblewrap."""

        def get_kernel_spec(self, kernel_name):
            spec = ipykernel.kernelspec.get_kernel_dict()
            argv = spec["argv"]
            if not debugger and argv[1:3] == ["-m", "ipykernel_launcher"]:
                argv = [argv[0], "-c", WITHOUT_DEBUGGER, *argv[3:]]
            spec["argv"] = [*prefix, *argv]
            # interrupt by message: the kernel signals itself. A SIGINT sent from outside would also
            # reach bubblewrap, which would die and take the kernel with it.
            spec["interrupt_mode"] = "message"
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **spec)

    extra = (
        {}
        if connection_file is None
        else {
            "connection_file": str(connection_file),
            "transport": "ipc",
            "ip": ip or str(connection_file.parent / "kernel"),
        }
    )
    if context is not None:
        extra["context"] = context
        extra["session"] = grading_session()  # the grading run (a context of its own): bounded decoding
        extra["client_factory"] = grading_client_class()  # and bounded queues per channel

    class GradingKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if before_launch is not None:
                before_launch(Path(self.connection_file))
            launched = await super()._async_launch_kernel(kernel_cmd, **kw)
            if after_launch is not None:  # the file is written: from now on the grader's own view of the sockets
                self.ip = after_launch(self)
            return launched

    return GradingKernelManager(kernel_name="python3", kernel_spec_manager=GradingKernels(), **extra)


def client_class():
    """The nbclient NotebookClient class of a grading run (output kept within MAX_OUTPUT_CHARS per cell and
    MAX_NOTEBOOK_OUTPUT_CHARS per notebook; timed-out cells noted)."""
    from nbclient import NotebookClient

    class GradingClient(NotebookClient):
        """Keeps only stdout and errors of each cell (at most MAX_OUTPUT_CHARS), and notes timeouts."""

        timed_out_cells: set = set()
        #: characters of student output still kept for this notebook; private cells (answers) are not counted
        notebook_budget: int = MAX_NOTEBOOK_OUTPUT_CHARS
        private: bool = False

        async def _async_handle_timeout(self, timeout, cell=None):
            if cell is not None:
                self.timed_out_cells = {*self.timed_out_cells, id(cell)}
            return await super()._async_handle_timeout(timeout, cell)

        def output(self, outs, msg, display_id, cell_index):
            """Keep a cell's stdout (at most MAX_OUTPUT_CHARS, and the notebook's budget) and its first error (its
            ename and evalue cut, charged to the same budgets); anything else, and every later error, is dropped:
            a cell holds at most three outputs whatever its kernel sends (400,000 error messages took the
            grader to 278 MB: default/09, container/18)."""
            kind = msg["msg_type"]
            content = msg.get("content", {})
            if kind == "stream" and content.get("name") == "stdout":
                self._keep(outs, "stream", str(content.get("text", "")))
            elif kind == "error" and not any(o.get("output_type") == "error" for o in outs):
                self._keep(outs, "error", str(content.get("ename", "Error"))[:200], str(content.get("evalue", "")))
            return None

        def _keep(self, outs, kind: str, text: str, evalue: str = "") -> None:
            """Append `text` (a stream's) or an error (`text` its name) to `outs`, within the budgets."""
            from nbformat.v4 import new_output

            kept = sum(len(o.get("text", "")) + len(o.get("evalue", "")) + len(o.get("ename", "")) for o in outs)
            room = MAX_OUTPUT_CHARS - kept
            if not self.private:
                room = min(room, self.notebook_budget)
            if kind == "error":
                evalue = evalue[: max(0, min(1000, room - len(text)))]
                size = len(text) + len(evalue)
            else:
                text = text[: max(0, room)]
                size = len(text)
            if not self.private:
                self.notebook_budget -= size
            if kind == "error":
                outs.append(new_output("error", ename=text, evalue=evalue, traceback=[]))
            elif text and outs and outs[-1].get("output_type") == "stream":
                outs[-1]["text"] += text
            elif text:
                outs.append(new_output("stream", name="stdout", text=text))

    return GradingClient
