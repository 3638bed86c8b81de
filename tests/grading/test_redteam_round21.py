"""Red team round 21: the round-19/20 message handling (messages.grading_session, run_in_kernel's catch of any
failure while the student's cells run) attacked in the generated Gradescope autograder, where phase 1 (root, no
roster, no secret) runs the notebook's kernel as the unprivileged user and writes the answers on its stdout into a
file of root's private folder, and phase 2 (root) checks them and writes results.json.

No attack of the round succeeded; these tests keep what was tried:

01-reach-answers: the kernel's user looked for a way to write what phase 2 reads (the root grader's stdout through
/proc/PID/fd/1, the private folder ROOT/.distlab.*, its own inherited descriptors) and found none; a forged or
corrupted answers.json would score 0 here (the run is the solved notebook's 8/8).
02-log-flood: messages nbclient does not expect for the running cell (replies and an unknown status on iopub, a
reply on shell, clear_output, execute_input with an object as its count), 8 s of them, neither changed the score
nor wrote a line to phase 1's log (the grader's stderr, which run_autograder copies to its own).
06-catch-all-container: what a still unforeseen message would make nbclient raise (injected here: phase 1's Python
raises in nbclient when a stream of the running cell says so) ends phase 1's run at that cell with the grader's
note; the answers read before it cross to phase 2 and count (8/8), and the cell after it does not run.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from class_helpers import autograder_env, needs_unprivileged_python, unprivileged_python
from test_container_mode import _append_cell, _bobs, autograder  # noqa: F401  (autograder: a fixture)

pytestmark = [pytest.mark.notebook, needs_unprivileged_python]

#: 01: every way the kernel's user might reach the file phase 1 writes (its stdout) or root's private folder
REACH = r"""
import glob, os
tried = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for fd in ("1", "2"):
        try:
            w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_APPEND)
        except OSError:
            continue
        try:
            os.write(w, b"FORGED {not json")
            tried.append(f"{pid}/{fd}")
        finally:
            os.close(w)
for path in glob.glob(ROOT + "/.distlab.*/answers.json") + glob.glob(ROOT + "/.distlab.*"):
    try:
        with open(path + ("/answers.json" if os.path.isdir(path) else ""), "a") as f:
            f.write("FORGED")
        tried.append(path)
    except OSError:
        pass
"""

#: 02: 8 s of messages for the running cell that nbclient does not expect, on iopub and shell
ODD_MESSAGES = r"""
import time
k = get_ipython().kernel
parent, s = k.get_parent("shell"), k.session
kinds = [
    ("iopub", "execute_reply", {"status": "ok", "execution_count": 1}),
    ("iopub", "kernel_info_reply", {"status": "ok"}),
    ("iopub", "status", {"execution_state": "weird"}),
    ("iopub", "clear_output", {"wait": True}),
    ("iopub", "execute_input", {"code": "x", "execution_count": {"a": 1}}),
    ("shell", "interrupt_reply", {"status": "ok"}),
    ("iopub", "shutdown_reply", {"status": "ok", "restart": True}),
]
t, n = time.time(), 0
while time.time() - t < 8:
    for channel, kind, content in kinds:
        header = s.msg_header(kind)
        header["date"] = "2020-01-01T00:00:%02d.%06d" % (n % 60, n % 999999)
        msg = {"header": header, "parent_header": parent, "metadata": {}, "content": content,
               "msg_id": header["msg_id"], "msg_type": kind}
        s.send(k.iopub_socket if channel == "iopub" else k.shell_stream, msg)
        n += 1
"""


def test_the_kernel_can_neither_forge_the_answers_file_nor_fill_phase_ones_log(autograder):  # noqa: F811
    root, roster = autograder
    notebook = _bobs(root, roster)
    _append_cell(notebook, REACH.replace("ROOT", repr(str(root))))
    _append_cell(notebook, ODD_MESSAGES)
    (root / "submission" / "01_memory_wall.ipynb").write_bytes(notebook.read_bytes())
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=autograder_env(root),
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads((root / "results" / "results.json").read_text())
    assert result["score"] == 8.0, result["output"]
    # the grader's own log holds only the script's notes on namespaces the host refuses, never a line per message
    log = [line for line in done.stderr.splitlines() if not line.startswith("note: ")]
    assert log == [], log[:5]


#: 06: phase 1's Python, with nbclient raising (as an unforeseen kernel message would make it) on a stream of the
#: running cell that says RT21-BOOM; every other run of it (phase 2, the kernel) is the real interpreter
FAULTY_PYTHON = """#!{python} -I
import os, sys
argv = sys.argv[1:]
if "--answers-out" not in argv or argv[:2] != ["-I", "-c"]:
    os.execv({python!r}, [{python!r}, *argv])
sys.path[:0] = [p for p in argv[3].split(":") if p.startswith("/")]
import nbclient.client as c
real = c.NotebookClient.process_message
def process_message(self, msg, cell, cell_index):
    if "RT21-BOOM" in str(msg.get("content", {{}}).get("text", "")):
        raise AttributeError("what an unforeseen kernel message makes nbclient raise")
    return real(self, msg, cell, cell_index)
c.NotebookClient.process_message = process_message
import runpy
sys.argv = ["distlab", *argv[4:]]
runpy.run_module("distlab", run_name="__main__", alter_sys=True)
"""


def test_the_catch_all_in_phase_one_keeps_the_answers_read_before_it(autograder):  # noqa: F811
    root, roster = autograder
    python = root.parent / "faulty-python"
    python.write_text(FAULTY_PYTHON.format(python=unprivileged_python()[0]))
    os.chmod(python, 0o755)
    notebook = _append_cell(_append_cell(_bobs(root, roster), 'print("RT21-BOOM")'), "answer_q1 = 12345")
    (root / "submission" / "01_memory_wall.ipynb").write_bytes(notebook.read_bytes())
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=autograder_env(root, DISTLAB_PYTHON=str(python)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads((root / "results" / "results.json").read_text())
    assert "the grader failed on the kernel's messages in code cell 10 (AttributeError)" in result["output"], (
        result["output"],
        done.stderr[-2000:],
    )
    assert result["score"] == 8.0  # q1 read before the failure; the cell after it (a wrong q1) did not run
