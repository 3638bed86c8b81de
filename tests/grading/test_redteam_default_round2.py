"""Red-team reproducers, second round of the default (bubblewrap) mode: each test asserts the secure behaviour and
FAILS while the hole exists (the attacks: issue 28's second default-mode round, NN-name as in its SUMMARY).
"""

from __future__ import annotations

import subprocess
import sys

from distlab.grading.messages import json_containers

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
