"""Reading the kernel's messages within bounds: the grader's memory per message is bounded by the message's size,
whatever the kernel sends (distlab.grading.kernel runs the kernel with grading_session() and a zmq context whose
sockets drop any message over MAX_MESSAGE_BYTES before it is read).
"""

from __future__ import annotations

import re
import time
from queue import Empty
from typing import NamedTuple

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MAX_STREAM_BYTES",
    "KEPT_MESSAGES",
    "MAX_CONTAINERS",
    "MAX_PART_BYTES",
    "MAX_VALUES",
    "JsonCounts",
    "json_counts",
    "json_containers",
    "grading_session",
    "READ_CHANNELS",
    "READ_STRINGS",
    "OBJECT_PARTS",
    "READ_QUEUE",
    "UNREAD_MESSAGE_BYTES",
    "grading_client_class",
]

#: a message from the kernel larger than this is dropped by zmq before it is read (print('y' * 10**9))
MAX_MESSAGE_BYTES = 8 * 2**20
#: a stream message (printed text) whose content is larger than this is dropped unread: an 8 MB one of ASCII and one
#: emoji decodes to 32 MB of text twice (the JSON and the string: the grader grew by 64 MB for one message), and the
#: grader keeps 200,000 characters per cell at most (the answers, printed as escaped ASCII, fit in 0.4 MB)
MAX_STREAM_BYTES = 2**20

#: message types the grader decodes (what nbclient needs to run a cell and what the grade reads); any other
#: (display data, widgets' comm messages, ...) is dropped before its content is decoded
KEPT_MESSAGES = frozenset(
    {
        "status",
        "stream",
        "error",
        "execute_input",
        "execute_reply",
        "kernel_info_reply",
        "clear_output",
        "shutdown_reply",
        "interrupt_reply",
    }
)
#: a message part (header, metadata, content) holding more JSON objects and arrays than this is not decoded:
#: "{}, " sent 1.9 million times is 7.6 MB on the wire and ~100 MB of dicts once decoded
MAX_CONTAINERS = 64
#: a message part holding more JSON values than this (scalars and keys included) is not decoded either: an 8 MB
#: stream message of 1.68 million one-character strings decodes to 141 MB of str objects (default/05); the
#: messages the grader reads hold a few dozen (an error's traceback: a string per frame)
MAX_VALUES = 4_096
#: size of any part but a stream's text that the grader decodes (bytes)
MAX_PART_BYTES = 64 * 2**10
#: a JSON string once its escapes are gone (no quote inside: nothing to backtrack), or an unterminated one
_JSON_STRING = re.compile(rb'"[^"]*(?:"|\Z)')
#: json_containers reads its input in pieces of this many bytes (its memory: a few pieces, whatever the input's size)
_PIECE = 2**20


class JsonCounts(NamedTuple):
    """What a JSON text holds, counted before it is decoded (json_counts)."""

    containers: int  #: objects and arrays
    values: int  #: every value and key, scalars included (an upper bound: 1 + the , : [ { outside strings)
    string_bytes: int  #: bytes inside strings, quotes and escapes included


def json_counts(raw: bytes) -> JsonCounts:
    """How many JSON objects and arrays, values, and bytes of strings `raw` holds, read before decoding it.

    Every value but the first follows a `,` `:` `[` or `{` outside strings, so 1 + their count bounds the values
    (keys included) whatever `raw` holds. Read as UTF-8 (its multi-byte characters never hold an ASCII byte); the
    caller refuses any other encoding. Linear time and memory of a few _PIECE-sized pieces whatever `raw` holds (a
    kernel or a student controls it): in each piece, escaped backslashes, then escaped quotes are removed with
    bytes.replace (escapes pair from the left, as JSON reads them; an odd run of backslashes at a piece's end
    leaves one to the next piece), so no string holds a quote any more and one regex without alternatives or
    nested repeats removes the strings."""
    view, containers, values, outside, in_string, carry = memoryview(raw), 0, 1, 0, False, b""
    for start in range(0, len(raw), _PIECE):
        piece = carry + bytes(view[start : start + _PIECE])
        kept = piece.rstrip(b"\\") if start + _PIECE < len(raw) else piece
        carry = b"\\" * ((len(piece) - len(kept)) % 2)  # pairs of them are escaped backslashes: only one may stay
        unescaped = (b'"' if in_string else b"") + kept.replace(b"\\\\", b"").replace(b'\\"', b"")
        in_string = unescaped.count(b'"') % 2 == 1
        stripped = _JSON_STRING.sub(b"", unescaped)
        outside += len(stripped)
        containers += stripped.count(b"{") + stripped.count(b"[")
        values += stripped.count(b",") + stripped.count(b":") + stripped.count(b"{") + stripped.count(b"[")
    return JsonCounts(containers, values, len(raw) - outside)


def json_containers(raw: bytes) -> int:
    """How many JSON objects and arrays `raw` holds (brackets outside strings), read before decoding it
    (json_counts)."""
    return json_counts(raw).containers


def _bounded(raw: bytes, limit: int = MAX_PART_BYTES) -> bool:
    if len(raw) > limit:
        return False
    counts = json_counts(raw)
    return counts.containers <= MAX_CONTAINERS and counts.values <= MAX_VALUES


#: the fields of a message's content that nbclient reads as strings without checking them (content["status"] of a
#: reply, content["execution_state"] of a status): a message of that type without them is dropped (red team round 19
#: 04: an execute_reply with no status raised KeyError in the grader and ended the whole run); any other message gets
#: an empty status (nbclient reads the status of whatever shell message answers a cell)
READ_STRINGS = {"status": ("execution_state",), "execute_reply": ("status",)}

#: the parts of a message nbclient reads as JSON objects (it calls msg["parent_header"].get for every message it
#: reads, whatever its parent): a message whose part is any other JSON value is dropped (red team round 20 01: a
#: parent header of [] ended the run at that cell, the cells after it unrun)
OBJECT_PARTS = ("header", "parent_header", "metadata")

#: the status an execute_reply too large to decode arrives with (grading_session): not "ok", not "error", so nbclient
#: neither raises nor counts it; kernel._run_student_cell says the reply was dropped
DROPPED_REPLY_STATUS = "distlab-dropped"


def grading_session():
    """A jupyter_client Session that decodes only what the grader reads, within bounds (KEPT_MESSAGES,
    MAX_CONTAINERS, MAX_VALUES, MAX_PART_BYTES; a stream's text up to MAX_STREAM_BYTES): the grader's memory per message
    is bounded by the message's size, whatever the kernel sends. Anything else arrives as "distlab_dropped"
    with empty content (nbclient ignores it)."""
    from jupyter_client.session import Session

    def dropped() -> dict:
        header = {"msg_type": "distlab_dropped", "msg_id": "", "session": "", "username": "", "version": "5.3"}
        return {
            "header": header,
            "msg_id": "",
            "msg_type": "distlab_dropped",
            "parent_header": {},
            "metadata": {},
            "content": {},
            "buffers": [],
        }

    class GradingSession(Session):
        #: how many execute_replies were too large to decode: each arrives with its header and parent header (read
        #: within bounds) and content {"status": DROPPED_REPLY_STATUS} alone, so its cell ends when the kernel says it
        #: did, not at its time limit (red team round 14 04: a 3 MB exception message was reported as "an infinite
        #: loop?"). A list of this class (one class per grading_session call): the client's copy of the session
        #: counts into the manager's
        replies_dropped = [0]

        def feed_identities(self, msg_list, copy=True):
            """The routing prefix and the message's parts; a message without jupyter's delimiter frame has no
            parts: deserialize drops it. Session's raised ValueError in the grader's channel, outside deserialize,
            and one `send_multipart([b"x"])` of the kernel's ended the whole run (red team round 19 03)."""
            try:
                return super().feed_identities(msg_list, copy)
            except ValueError:
                return [], []

        def deserialize(self, msg_list, content=True, copy=True):
            frames = [bytes(getattr(f, "bytes", f)) for f in msg_list[:5]]
            if len(frames) < 5 or not all(_bounded(f) for f in frames[1:4]):
                return dropped()
            try:  # a part that is not JSON (or not UTF-8) is dropped like any other the grader does not read
                message = super().deserialize(frames, content=False, copy=True)
                if not all(isinstance(message[part], dict) for part in OBJECT_PARTS):
                    return dropped()
                body, kind = frames[4], message["msg_type"]
                limit = MAX_STREAM_BYTES if kind == "stream" else MAX_PART_BYTES
                if not content or kind not in KEPT_MESSAGES or not _bounded(body, limit):
                    if content and kind == "execute_reply":
                        self.replies_dropped[0] += 1
                        message["content"] = {"status": DROPPED_REPLY_STATUS}  # the cell ended: no wait for its limit
                        return message
                    return dropped() if content else message
                decoded = self.unpack(body)
            except (ValueError, TypeError, KeyError, RecursionError):
                return dropped()
            if not isinstance(decoded, dict) or not all(
                isinstance(decoded.get(key), str) for key in READ_STRINGS.get(kind, ())
            ):
                return dropped()
            decoded.pop("transient", None)  # nbclient calls its .get(); the grader keeps no display to update
            # nbclient takes any shell message whose parent is the running cell as its reply and reads its
            # content["status"]: every message it is handed has one (a stream sent on shell raised KeyError)
            decoded.setdefault("status", "")
            message["content"] = decoded
            return message

    return GradingSession()


#: the channels the grader reads while a cell runs (nbclient): replies on shell, output on iopub
READ_CHANNELS = frozenset({"shell", "iopub"})
#: messages each socket of a READ_CHANNELS queues at most (each up to MAX_MESSAGE_BYTES: 2 x 8 MB; the rest wait
#: in the relay and the kernel)
READ_QUEUE = 2
#: a frame larger than this on any other socket (stdin, control, heartbeat: the grader sends there, or reads a
#: 4-byte pong) ends that connection; each such socket queues one message. 8 messages of 8.4 MB per unread
#: socket held 222 MB in the grader until the kernel was shut down (default/02)
UNREAD_MESSAGE_BYTES = MAX_PART_BYTES
#: seconds the grader waits for the kernel's reply to its first kernel_info request before asking again; each
#: further wait is twice as long, up to READY_WAIT_MAX. A request sent before a bubblewrap kernel's sockets exist
#: can be lost in the relay (4 of 10 starts here), and jupyter_client's own wait is 1 s before it asks again
READY_WAIT_FIRST = 0.05
READY_WAIT_MAX = 1.0
#: seconds the grader waits for the kernel's iopub message about the answered request (its "idle" status)
#: before it asks again: jupyter_client's figure, spent only where iopub is not yet connected
READY_IOPUB_WAIT = 0.2


def grading_client_class():
    """An AsyncKernelClient whose shell and iopub sockets take messages up to MAX_MESSAGE_BYTES and queue READ_QUEUE
    of them; its other sockets (and the kernel manager's control socket) get the grading context's defaults, set by
    distlab.grading.kernel: UNREAD_MESSAGE_BYTES and a queue of 1. So all the grader's zmq queues together hold at
    most ~2 x 2 x 8 MB plus a message being received per socket, whatever the kernel sends on which channel."""
    import zmq
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.connect import channel_socket_types

    class GradingKernelClient(AsyncKernelClient):
        wait_for_ready = _wait_for_ready

        def _create_connected_socket(self, channel, identity=None):
            if channel not in READ_CHANNELS:
                return super()._create_connected_socket(channel, identity)
            sock = self.context.socket(channel_socket_types[channel])
            sock.linger = 1000
            sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)  # before connect: libzmq copies them then
            sock.setsockopt(zmq.RCVHWM, READ_QUEUE)
            if identity:
                sock.identity = identity
            sock.connect(self._make_url(channel))
            return sock

    return GradingKernelClient


async def _wait_for_ready(client, timeout: float | None = None) -> None:
    """Until the kernel has answered a kernel_info request on shell and reported it done on iopub: the grading
    client's wait_for_ready. As jupyter_client's, without waiting for what has already come: a request that got no
    reply is sent again after READY_WAIT_FIRST s, then twice as long each time up to READY_WAIT_MAX (jupyter_client:
    1 s each), and iopub is read up to the "idle" status of the request answered (jupyter_client: until iopub has
    been quiet for 0.2 s). The replies to earlier requests are read and dropped here, as jupyter_client drops what
    iopub held."""
    deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
    wait = READY_WAIT_FIRST
    while True:
        asked = client.kernel_info()
        reply = await _reply_to(
            client.shell_channel, asked, "kernel_info_reply", min(wait, deadline - time.monotonic())
        )
        if reply is not None and await _reply_to(client.iopub_channel, asked, "status", READY_IOPUB_WAIT, "idle"):
            client._handle_kernel_info_reply(reply)  # the protocol version the kernel speaks
            return
        if not await client.is_alive():
            # no cell of the notebook has run yet: the grader's set-up, not the submission (test_grader_pythons)
            raise RuntimeError(
                "Kernel died before replying to kernel_info: the grading kernel could not start, before any cell ran "
                "(the grader's set-up, not this notebook: its Python or packages do not run in the sandbox; grade a "
                "notebook of solutions/ to check the set-up)"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")
        wait = min(2 * wait, READY_WAIT_MAX)


async def _reply_to(channel, msg_id: str, msg_type: str, wait: float, state: str | None = None) -> dict | None:
    """The message of `msg_type` on `channel` whose parent is request `msg_id` (and whose execution_state is
    `state`, given one), read within `wait` s, else None; every other message read is dropped."""
    until = time.monotonic() + max(0.0, wait)
    while True:
        try:
            msg = await channel.get_msg(timeout=max(0.0, until - time.monotonic()))
        except Empty:
            return None
        if (
            msg.get("msg_type") == msg_type
            and msg.get("parent_header", {}).get("msg_id") == msg_id
            and (state is None or msg.get("content", {}).get("execution_state") == state)
        ):
            return msg
