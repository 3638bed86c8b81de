"""A bounded relay between the grader's sockets and the kernel's: every message the kernel sends is read by a
bounded parser of ZMTP's framing before the grader's zmq sees it, and a message over MAX_FRAMES frames or
max_bytes in all is dropped whole. libzmq receives a multipart message completely before its first frame can be
read, and MAXMSGSIZE bounds one frame only: 60 frames of 7 MB (527 MB) or 3 million frames of 1 byte (325 MB)
reached the grader's memory as one message (02-multipart-frames-memory, 26-many-tiny-frames).

The framing read here (ZMTP 3.x, https://rfc.zeromq.org/spec/23/ and /spec/37/): a 64-byte greeting, then
frames, each a flags byte (MORE 0x01, LONG 0x02, COMMAND 0x04), a size (1 byte, or 8 bytes big-endian when
LONG) and that many bytes. Commands (READY, PING/PONG) are passed on as they are, up to MAX_COMMAND_BYTES.
The grader's bytes to the kernel are copied unchanged. Used by distlab.grading.kernel for a bubblewrap kernel and a
container kernel of its own user.
"""

from __future__ import annotations

import functools
import os
import socket
import stat
import struct
import threading
import time
from pathlib import Path

__all__ = ["MAX_FRAMES", "MAX_COMMAND_BYTES", "MAX_CONNECTIONS", "Relay"]

#: frames one kernel message may have: jupyter's delimiter, signature, header, parent, metadata, content (and a
#: topic on iopub) are 7; widget buffers are dropped by the grader anyway
MAX_FRAMES = 12
#: a command (READY with its metadata, PING) larger than this ends the connection
MAX_COMMAND_BYTES = 4096
#: connections open at once per port (the grader's client and its kernel manager make at most 2 to one port)
MAX_CONNECTIONS = 4
#: how long a connection to the kernel's socket may take (its listener's queue full: red team 3, container/10)
CONNECT_SECONDS = 5.0
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

    The kernel's socket is reached without following a link (its folder is the kernel's to write: a link there sent
    the root grader to any host socket, or to this relay's own listener in an endless loop: red team round 2,
    default/01, class/05, class/06): the name is opened O_PATH|O_NOFOLLOW in that folder, must be a socket on the
    folder's own file system, and is connected through /proc/self/fd. The peer is then checked (SO_PEERCRED): user
    `peer_uid` (the kernel's) and, given `namespace_of` (the sandbox's process 1), a process of that pid namespace.
    At most MAX_CONNECTIONS per port are open at once, and each is closed (both sockets) when either side ends:
    a kernel cutting its connections over and over made the grader keep 2 descriptors per cut (default/07).

    prefix: the path prefix the grader connects to. dropped: how many kernel messages were dropped. refused: how
    many connections to the kernel were refused. close() ends every connection and listener.
    """

    def __init__(
        self,
        folder: Path,
        target_prefix: str,
        ports: list[int],
        max_bytes: int,
        peer_uid: int | None = None,
        namespace_of: int | None = None,
    ):
        folder.mkdir(mode=0o700, exist_ok=True)
        self.prefix = str(folder / "kernel")
        self.target_prefix, self.max_bytes = target_prefix, max_bytes
        self.peer_uid = peer_uid
        self.namespace = _pid_namespace(namespace_of) if namespace_of is not None else None
        self.dropped = [0]
        self.refused = 0
        self._sockets: set[socket.socket] = set()
        self._open = dict.fromkeys(ports, 0)
        self._lock = threading.Lock()
        self._closed = False
        for port in ports:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(f"{self.prefix}-{port}")
            os.chmod(f"{self.prefix}-{port}", 0o600)
            listener.listen(8)
            self._sockets.add(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while True:
            try:
                grader, _ = listener.accept()
            except OSError:
                if self._closed:
                    return
                time.sleep(0.1)  # out of descriptors for now (EMFILE): the listener stays
                continue
            with self._lock:
                room = not self._closed and self._open[port] < MAX_CONNECTIONS
            kernel = self._connect(port) if room else None
            if kernel is None:
                grader.close()
                continue
            with self._lock:
                kept = not self._closed
                if kept:
                    self._open[port] += 1
                    self._sockets.update((kernel, grader))
            if not kept:
                grader.close()
                kernel.close()
                return
            link = [kernel, grader, 2, port]
            for work in (
                functools.partial(_pump_messages, kernel, grader, self.max_bytes, self.dropped),
                functools.partial(_pump_bytes, grader, kernel),
            ):
                threading.Thread(target=self._run, args=(work, link), daemon=True).start()

    def _connect(self, port: int) -> socket.socket | None:
        """A connection to the kernel's socket of `port`, or None (no such socket, a link, not the kernel's)."""
        folder, name = os.path.split(f"{self.target_prefix}-{port}")
        fds: list[int] = []
        sock = None
        try:
            fds.append(os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW))
            fds.append(os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=fds[0]))
            found = os.fstat(fds[1])
            if stat.S_ISSOCK(found.st_mode) and found.st_dev == os.fstat(fds[0]).st_dev:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(CONNECT_SECONDS)  # a listener that never accepts does not hold this port's thread
                sock.connect(f"/proc/self/fd/{fds[1]}")  # this very socket: no name is looked up again
                sock.settimeout(None)
                if self._peer_ok(sock):
                    sock, kept = None, sock
                    return kept
        except OSError:
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if sock is not None:
                sock.close()
        self.refused += 1
        return None

    def _peer_ok(self, sock: socket.socket) -> bool:
        """Whether the process that listens on `sock`'s other end is the kernel's (its user, its pid namespace)."""
        pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if self.peer_uid is not None and uid != self.peer_uid:
            return False
        if self.namespace is not None:
            try:
                return pid > 0 and _pid_namespace(pid) == self.namespace
            except OSError:
                return False
        return True

    def _run(self, work, link: list) -> None:
        try:
            work()
        except (_Closed, OSError):
            pass
        kernel, grader = link[0], link[1]
        for sock in (kernel, grader):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the connection's other pump
            except OSError:
                pass
        with self._lock:
            link[2] -= 1
            last = link[2] == 0
            if last:
                self._open[link[3]] -= 1
                self._sockets.difference_update((kernel, grader))
        if last:
            kernel.close()
            grader.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def _pid_namespace(pid: int) -> tuple[int, int]:
    """The pid namespace process `pid` is in (device and inode of /proc/<pid>/ns/pid)."""
    found = os.stat(f"/proc/{pid}/ns/pid")
    return found.st_dev, found.st_ino
