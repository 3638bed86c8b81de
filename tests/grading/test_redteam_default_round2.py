"""Red-team reproducers, second round of the default (bubblewrap) mode: each test asserts the secure behaviour and
FAILS while the hole exists (the attacks: issue 28's second default-mode round, NN-name as in its SUMMARY).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from distlab.grading.kernel import bwrap_available, run_in_kernel
from distlab.grading.messages import json_containers

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")


def run_bwrap(cells: list[str], base: Path, problems: list[str], timeout: float = 60, cell_timeout: float = 30):
    """The answer snapshot of `cells` run in one bubblewrap kernel (base: the run's private folder)."""
    (base / "submission.ipynb").write_text("{}")
    return run_in_kernel(
        cells,
        base / "work",
        answer_names=["answer_x"],
        timeout=timeout,
        cell_timeout=cell_timeout,
        sandbox="bwrap",
        memory_limit=8 * 2**30,
        file_size_limit=64 * 2**20,
        problems=problems,
    )


# 04-regex-redos-grader-hang: b'"' + b'\\"' * n made the old string regex restart at every quote and scan to the end
# (n**2 / 2 steps: 16 kB took 3.7 s, 2 MB ~18 h). Everything after the first quote is one unterminated string, so no
# bracket is outside a string: 0 containers. Run in a child with a time limit, so the old code fails, not hangs.
REDOS = r"""
import time
from distlab.grading.messages import MAX_MESSAGE_BYTES, json_containers
for raw in (b'"' + b'\\"' * (MAX_MESSAGE_BYTES // 2), b'"' + b'\\\\\\"' * (MAX_MESSAGE_BYTES // 4)):
    started = time.perf_counter()
    assert json_containers(raw + b"[{") == 0
    print(time.perf_counter() - started)
"""


def test_redteam_an_unterminated_string_of_escaped_quotes_is_counted_in_linear_time():
    try:
        done = subprocess.run([sys.executable, "-c", REDOS], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("json_containers took more than 20 s on 8 MB") from None
    assert done.returncode == 0, done.stderr
    assert all(float(s) < 0.5 for s in done.stdout.split()), done.stdout
    # escapes pair from the left as JSON reads them: '"\\\\"' is a string ending in a backslash, then one list
    assert json_containers(b'"\\\\" [') == 1
    assert json_containers(b'["\\"[", {"{": [1]}]') == 3  # the list, the object, the inner list


# 01-shell-flood-hang: a cell that never finishes sends small, correctly signed messages on the kernel's own shell
# socket; nbclient looks at a cell's deadline only when no message arrives, so neither the cell's nor the notebook's
# limit took effect (--timeout 20 ran 209 s). The loop stops itself after 150 s, so the old code fails, not hangs.
SHELL_FLOOD = r"""
import time
k = get_ipython().kernel
ident, sock, session = k._parent_ident["shell"], k.shell_stream.socket, k.session
end = time.monotonic() + 150
while time.monotonic() < end:
    try:
        session.send(sock, "comm_msg", {"data": {}}, ident=ident)
    except BaseException:
        pass
"""


@needs_bwrap
def test_redteam_a_kernel_flooding_its_shell_socket_is_killed_at_the_notebook_deadline(tmp_path):
    problems: list[str] = []
    started = time.monotonic()
    run_bwrap(["answer_x = 1", SHELL_FLOOD], tmp_path, problems, timeout=10, cell_timeout=5)
    # the hard deadline: the notebook's 10 s + HARD_DEADLINE_GRACE (20 s), plus the kernel's start and the kill (< 20 s)
    assert time.monotonic() - started < 10 + 20 + 20, problems
