"""run_until_blocked (tests/widgets/blocked.py), which the thread tests rely on to let a second thread run as far as
it can: it must return at once for a thread waiting on a held lock or one that has ended, and only at its limit for
a thread still working."""

from __future__ import annotations

import threading
import time

from blocked import run_until_blocked, waiting_for_a_lock


def test_a_thread_waiting_for_a_held_lock_is_seen_at_once():
    lock = threading.RLock()
    entered = []

    def take():
        with lock:
            entered.append(1)

    other = threading.Thread(target=take)
    with lock:
        start = time.monotonic()
        run_until_blocked(other, limit=5.0)
        waited = time.monotonic() - start
        assert waiting_for_a_lock(other) and not entered
    other.join()
    assert entered == [1] and waited < 2.0, waited


def test_a_thread_that_ends_is_not_waited_for():
    other = threading.Thread(target=lambda: None)
    start = time.monotonic()
    run_until_blocked(other, limit=5.0)
    assert time.monotonic() - start < 2.0 and not other.is_alive() or other.join() is None


def test_a_thread_still_working_is_given_its_whole_limit():
    stop = threading.Event()

    def work():
        while not stop.is_set():
            sum(range(100))

    other = threading.Thread(target=work)
    start = time.monotonic()
    run_until_blocked(other, limit=0.3)
    waited = time.monotonic() - start
    stop.set()
    other.join()
    assert waited >= 0.3
