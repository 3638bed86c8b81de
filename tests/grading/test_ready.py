"""A grading kernel's start: the grading client's wait for it (distlab.grading.messages: wait_for_ready), and
ipykernel started without its debugger (distlab.grading.notebook_client.WITHOUT_DEBUGGER).

A fake kernel client stands in for the kernel: its shell and iopub channels are queues, and kernel_info() answers
(a kernel_info_reply on shell, then "busy" and "idle" status messages on iopub) unless the test drops that request,
as the relay in front of a bubblewrap kernel can drop one sent before the kernel's sockets exist.
"""

from __future__ import annotations

import asyncio
import time
from queue import Empty

import nbformat
import nbformat.v4 as v4
import pytest
from jupyter_client import KernelManager

from distlab.grading import grade, report
from distlab.grading.messages import READY_IOPUB_WAIT, READY_WAIT_FIRST, grading_client_class
from distlab.lessons.questions import CORRECT


class _Channel:
    def __init__(self):
        self.queue: asyncio.Queue = asyncio.Queue()

    async def get_msg(self, timeout=None):
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            raise Empty from None


def _msg(msg_type: str, parent: str, **content) -> dict:
    return {"msg_type": msg_type, "parent_header": {"msg_id": parent}, "content": content}


class _FakeClient:
    """kernel_info() requests numbered 1, 2, ...; those in `lost` get nothing back, `dead` ends the kernel."""

    def __init__(self, lost=(), alive=True):
        self.shell_channel, self.iopub_channel = _Channel(), _Channel()
        self.asked, self.lost, self.alive, self.handled = 0, set(lost), alive, []
        self.parent = KernelManager()  # as the grader's client: made by its kernel manager (never started here)

    def kernel_info(self) -> str:
        self.asked += 1
        msg_id = f"request-{self.asked}"
        if self.alive and self.asked not in self.lost:
            self.shell_channel.queue.put_nowait(_msg("kernel_info_reply", msg_id, protocol_version="5.3"))
            for state in ("busy", "idle"):
                self.iopub_channel.queue.put_nowait(_msg("status", msg_id, execution_state=state))
        return msg_id

    async def is_alive(self) -> bool:
        return self.alive

    _async_is_alive = is_alive  # jupyter_client's own wait calls this name

    def _handle_kernel_info_reply(self, msg):
        self.handled.append(msg["parent_header"]["msg_id"])


def _wait(client, timeout=None) -> float:
    start = time.monotonic()
    asyncio.run(grading_client_class().wait_for_ready(client, timeout))
    return time.monotonic() - start


def test_a_lost_first_request_is_asked_again_at_once_not_after_a_second():
    # jupyter_client waits 1 s for each reply before asking again, then 0.2 s of iopub silence: 1.2 s here.
    # Asked again after READY_WAIT_FIRST (0.05 s), then READY_WAIT_FIRST * 2: two lost requests cost 0.15 s
    client = _FakeClient(lost={1, 2})
    took = _wait(client, timeout=10)
    assert client.asked == 3 and client.handled == ["request-3"]
    assert took < 3 * READY_WAIT_FIRST + 0.35, took  # 0.15 s of waits, and scheduling slack on a loaded machine


def test_an_answered_request_costs_no_quiet_time_on_iopub():
    # the reply and its "idle" status are read as they come: no 0.2 s of iopub silence is waited for
    client = _FakeClient()
    took = _wait(client, timeout=10)
    assert client.asked == 1 and client.handled == ["request-1"]
    assert took < READY_IOPUB_WAIT, took
    # everything the kernel sent about the request is read: no stale reply or status is left for the first cell
    assert client.shell_channel.queue.empty() and client.iopub_channel.queue.empty()


def test_replies_to_earlier_requests_are_read_and_dropped():
    # request 1's reply comes late, after request 2 was sent (a kernel answers in order: just before request 2's):
    # ready means the latest request was answered, and the reply to request 1 is not left on shell
    client = _FakeClient(lost={1})
    original = client.kernel_info

    def late_first_reply():
        if client.asked == 1:
            client.shell_channel.queue.put_nowait(_msg("kernel_info_reply", "request-1", protocol_version="5.3"))
        return original()

    client.kernel_info = late_first_reply
    _wait(client, timeout=10)
    assert client.handled == ["request-2"]
    assert client.shell_channel.queue.empty() and client.iopub_channel.queue.empty()


def test_a_dead_kernel_and_a_silent_one_are_errors_not_a_hang():
    with pytest.raises(RuntimeError, match="died"):
        _wait(_FakeClient(alive=False), timeout=10)
    silent = _FakeClient(lost=set(range(1, 1000)))
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="didn't respond in 0.5 seconds"):
        asyncio.run(grading_client_class().wait_for_ready(silent, 0.5))
    assert time.monotonic() - start < 2.0
    assert 3 <= silent.asked <= 8  # 0.05, 0.1, 0.2, 0.4 s: asked again with longer waits, not in a busy loop


@pytest.mark.notebook
def test_a_grading_kernel_starts_without_ipykernels_debugger(tmp_path):
    # WITHOUT_DEBUGGER: ipykernel imports debugpy for its debugger when it can (0.07 s of CPU per kernel start);
    # a grading kernel never loads it. q1 of lesson 1 is 16 (bytes per parameter, mixed-precision Adam): answered
    # right only when no module of debugpy or its bundled pydevd is loaded, so a correct q1 shows the cell ran
    # and found none (and the notebook still runs as any other)
    cell = (
        "import sys\n"
        "loaded = sorted(m for m, v in sys.modules.items() if v is not None\n"
        "                and m.split('.')[0] in ('debugpy', '_pydevd_bundle', '_pydev_bundle', 'pydevd'))\n"
        "answer_q1 = 16 if not loaded else loaded\n"
    )
    nb = v4.new_notebook(cells=[v4.new_code_cell(cell)])
    nb.metadata["distlab"] = {"lesson": "memory_wall"}
    nbformat.write(nb, tmp_path / "nb.ipynb")
    result = grade.grade_notebook(tmp_path / "nb.ipynb")
    assert result.problems == []
    assert {q.question: q.status for q in result.questions}["q1"] == CORRECT, report.GradeReport([result]).table()
