"""A bounded relay between the grader's sockets and the kernel's: every message the kernel sends is read by a
bounded parser of ZMTP's framing before the grader's zmq sees it, and a message over MAX_FRAMES frames or
max_bytes in all is dropped whole. libzmq receives a multipart message completely before its first frame can be
read, and MAXMSGSIZE bounds one frame only: 60 frames of 7 MB (527 MB) or 3 million frames of 1 byte (325 MB)
reached the grader's memory as one message (02-multipart-frames-memory, 26-many-tiny-frames).

The framing read here (ZMTP 3.x, https://rfc.zeromq.org/spec/23/ and /spec/37/): a 64-byte greeting, then
frames, each a flags byte (MORE 0x01, LONG 0x02, COMMAND 0x04), a size (1 byte, or 8 bytes big-endian when
LONG) and that many bytes. Commands (READY, PING/PONG) are passed on as they are, up to MAX_COMMAND_BYTES.
The grader's bytes to the kernel are copied unchanged. Used by distlab.grading.kernel for a bubblewrap kernel.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
from pathlib import Path

__all__ = ["MAX_FRAMES", "MAX_COMMAND_BYTES", "Relay"]

#: frames one kernel message may have: jupyter's delimiter, signature, header, parent, metadata, content (and a
#: topic on iopub) are 7; widget buffers are dropped by the grader anyway
MAX_FRAMES = 12
#: a command (READY with its metadata, PING) larger than this ends the connection
MAX_COMMAND_BYTES = 4096
_GREETING = 64
_MORE, _LONG, _COMMAND = 0x01, 0x02, 0x04


class _Closed(Exception):
    """The connection ended (or broke the framing): both of its sockets are closed."""


def _read(reader, n: int) -> bytes:
    data = reader.read(n)
    if len(data) < n:
        raise _Closed
    return data


def _skip(reader, n: int) -> None:
    """Read and forget n bytes (a dropped message's frame): 64 kB held at a time."""
    while n:
        chunk = reader.read(min(n, 1 << 16))
        if not chunk:
            raise _Closed
        n -= len(chunk)


def _pump_messages(kernel: socket.socket, grader: socket.socket, max_bytes: int, dropped: list[int]) -> None:
    """Kernel -> grader: the greeting as is, then each message whole if within MAX_FRAMES and max_bytes."""
    greeting = b""
    while len(greeting) < _GREETING:  # passed on as it comes: each side sends its greeting in steps, waiting for
        chunk = kernel.recv(_GREETING - len(greeting))  # the other's signature and version between them
        if not chunk:
            raise _Closed
        greeting += chunk
        if greeting[:1] != b"\xff" or greeting[9:10] not in (b"", b"\x7f") or (len(greeting) > 10 and greeting[10] < 3):
            raise _Closed  # not ZMTP 3: nothing the kernel's libzmq speaks
        grader.sendall(chunk)
    reader = kernel.makefile("rb", buffering=1 << 16)  # frame headers read from a buffer, not a syscall each
    held: list[bytes] = []
    size, frames, dropping = 0, 0, False
    while True:
        flags = _read(reader, 1)[0]
        length = int.from_bytes(_read(reader, 8 if flags & _LONG else 1), "big")
        if flags & _COMMAND:
            if length > MAX_COMMAND_BYTES:
                raise _Closed
            grader.sendall(bytes([flags]) + length.to_bytes(8 if flags & _LONG else 1, "big") + _read(reader, length))
            continue
        frames += 1
        size += length
        if not dropping and (frames > MAX_FRAMES or size > max_bytes):
            dropping, held = True, []
        if dropping:
            _skip(reader, length)
        else:
            held.append(bytes([flags]) + length.to_bytes(8 if flags & _LONG else 1, "big") + _read(reader, length))
        if not flags & _MORE:
            if dropping:
                dropped[0] += 1
            else:
                grader.sendall(b"".join(held))
            held, size, frames, dropping = [], 0, 0, False


def _pump_bytes(source: socket.socket, target: socket.socket) -> None:
    while True:
        chunk = source.recv(1 << 16)
        if not chunk:
            raise _Closed
        target.sendall(chunk)


class Relay:
    """Unix sockets in `folder` named like the kernel's (kernel-<port>), each connection relayed to the kernel's
    socket of the same port under `target_prefix`; what the kernel sends is bounded (max_bytes per message).

    prefix: the path prefix the grader connects to. dropped: how many kernel messages were dropped. close() ends
    every connection and listener.
    """

    def __init__(self, folder: Path, target_prefix: str, ports: list[int], max_bytes: int):
        folder.mkdir(mode=0o700, exist_ok=True)
        self.prefix = str(folder / "kernel")
        self.target_prefix, self.max_bytes = target_prefix, max_bytes
        self.dropped = [0]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        for port in ports:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(f"{self.prefix}-{port}")
            os.chmod(f"{self.prefix}-{port}", 0o600)
            listener.listen(8)
            self._keep(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def _keep(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                sock.close()
                return False
            self._sockets.append(sock)
            return True

    def _accept(self, listener: socket.socket, port: int) -> None:
        while True:
            try:
                grader, _ = listener.accept()
            except OSError:
                return
            kernel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if not (self._keep(grader) and self._keep(kernel)):
                return
            try:
                kernel.connect(f"{self.target_prefix}-{port}")
            except OSError:
                grader.close()
                continue
            for work in (
                functools.partial(_pump_messages, kernel, grader, self.max_bytes, self.dropped),
                functools.partial(_pump_bytes, grader, kernel),
            ):
                threading.Thread(target=self._run, args=(work, kernel, grader), daemon=True).start()

    @staticmethod
    def _run(work, kernel: socket.socket, grader: socket.socket) -> None:
        try:
            work()
        except (_Closed, OSError):
            pass
        for sock in (kernel, grader):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
