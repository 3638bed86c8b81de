"""Container mode (the generated autograder's phase 1: a root grader, the kernel as an unprivileged user): every
message the kernel sends reaches the grader through the bounded relay, as in the bubblewrap mode.

Red team container 02-iopub-flood-grader-memory: the kernel, knowing its own session key, pushed a 4 MB signed
display_data 300 times onto its iopub socket and the root grader reached 525 MB; a single message of 60 frames of
7 MB (each under zmq's per-frame MAXMSGSIZE) reaches it whole, since libzmq receives a multipart message completely
before its first frame can be read. The issue's limit for the grader is 200 MB.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from class_helpers import KERNEL_ID, needs_unprivileged_python, unprivileged_python

pytestmark = [pytest.mark.notebook, needs_unprivileged_python]

# the grader's own peak memory (VmHWM, MiB), its problems and answers after running the cells argv[1:] in one
# container-mode kernel (as `distlab grade --container` does, DISTLAB_KERNEL_IDS naming the kernel's user)
CONTAINER_PEAK = r"""
import json, shutil, sys, tempfile
from pathlib import Path
from distlab.grading.kernel import run_in_kernel
base = Path(tempfile.mkdtemp(prefix="distlab-relay-"))
(base / "work").mkdir()
problems = []
try:
    snapshot = run_in_kernel(sys.argv[1:], base / "work", answer_names=["answer_x"], timeout=120, cell_timeout=60,
                             sandbox="container", memory_limit=8 * 2**30, file_size_limit=64 * 2**20,
                             problems=problems)
finally:
    shutil.rmtree(base, ignore_errors=True)
peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) // 1024
print(json.dumps({"peak": peak, "problems": problems, "answers": snapshot}))
"""

# one message of 60 extra frames of 7 MB (420 MB), signed with the kernel's own session
BIG_FRAMES = r"""
k = get_ipython().kernel
k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": "hi"}, parent=k.get_parent("shell"),
               buffers=[b"x" * (7 * 2**20)] * 60)
"""
# 02-iopub-flood: the same signed 4 MB display_data pushed 150 times straight onto the iopub socket
REPEATED = r"""
k = get_ipython().kernel
msg = k.session.msg("display_data", {"data": {"text/plain": "x" * (4 * 2**20)}, "metadata": {}},
                    parent=k.get_parent("shell"))
for _ in range(150):
    k.session.send(k.iopub_socket, msg)
"""


def _grade_in_container_mode(*cells: str) -> dict:
    python, path = unprivileged_python()
    env = {**os.environ, "DISTLAB_KERNEL_IDS": KERNEL_ID, "PYTHONPATH": path}
    done = subprocess.run([python, "-c", CONTAINER_PEAK, *cells], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


# the many-frames message reached 507 MB before the relay was used in container mode; the repeated messages are
# held to RECEIVE_QUEUE by the grader's own sockets (the first round's fix), and the relay must keep that so
@pytest.mark.parametrize("flood", [BIG_FRAMES, REPEATED], ids=["60-frames-of-7MB", "150-messages-of-4MB"])
def test_a_container_kernel_flooding_its_sockets_cannot_grow_the_root_grader(flood):
    found = _grade_in_container_mode(flood + "\nanswer_x = 1", "answer_x = 2")
    assert found["peak"] < 200, found
    # the grading went on: the answer after the flood was read
    assert found["answers"]["answer_x"] == 2, found
