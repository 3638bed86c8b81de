"""Start a thread and let it run as far as it can: until it ends or waits for a lock another thread holds. The
thread tests (test_comm_threads, test_framecache, test_widgets_remembered) deliver a change on a second thread in
the middle of a paint or a lookup; they used to wait a fixed second for it, which a thread blocked on the held lock
always spent whole (12 s per run of one test)."""

from __future__ import annotations

import linecache
import re
import sys
import threading
import time

#: A source line that waits for a lock: `with APP_LOCK:`, `with lock:`, `with _SPRITES_LOCK:`, `x.acquire(`.
_TAKES_A_LOCK = re.compile(r"^\s*with\b[^#]*\block\b|^\s*with\b[^#]*_LOCK\b|\.acquire\(", re.IGNORECASE)
#: Polls of the thread's innermost frame, this far apart (s).
_POLL_S = 0.001


def waiting_for_a_lock(thread: threading.Thread) -> bool:
    """Whether `thread`'s innermost Python frame is on a line that takes a lock (where an acquire blocks: the
    acquire of a C lock has no Python frame of its own)."""
    frame = sys._current_frames().get(thread.ident) if thread.ident is not None else None
    if frame is None:
        return False
    return bool(_TAKES_A_LOCK.search(linecache.getline(frame.f_code.co_filename, frame.f_lineno)))


def run_until_blocked(thread: threading.Thread, limit: float = 1.0) -> None:
    """Start `thread` (unless started) and return once it has ended or has stayed on a lock-taking line for two
    polls in a row (blocked, as the caller holds that lock), or after `limit` seconds at most."""
    if thread.ident is None:
        thread.start()
    deadline = time.monotonic() + limit
    seen = 0
    while thread.is_alive() and time.monotonic() < deadline:
        seen = seen + 1 if waiting_for_a_lock(thread) else 0
        if seen >= 2:
            return
        time.sleep(_POLL_S)
