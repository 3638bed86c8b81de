"""Red team round 19: the bounded decoding of the kernel's messages after 9a962d5 (a reply too large to decode still
ends its cell). Each test's evidence is in the round's notes (/work/redteam19/NN-name); the tests here assert the
behaviour wanted and fail before the fix.

- 03-undelimited-message: a message from the kernel without jupyter's delimiter frame (``<IDS|MSG>``), one
  ``send_multipart([b"x"])`` on the kernel's iopub or shell socket, raised ValueError from jupyter_client's
  Session.feed_identities in the grader's channel, outside the bounded decoding: the whole run ended, the answers
  read before were lost, and the report said "the notebook could not be run: ValueError: b'<IDS|MSG>' is not in
  list", the grader's words for its own failure (a solution notebook plus that one cell scored 0/8). Such a message
  is now dropped like any other the grader cannot read (messages.grading_session's feed_identities).
- 04-unchecked-content (/work/redteam19/04_unchecked_content): the same end of the run from a message the grader
  decodes whose content nbclient reads without checking: a stream whose "transient" is a number (AttributeError) or
  an execute_reply for the running cell with no "status", or a stream sent on shell for it (nbclient takes any
  shell message of the cell as its reply: KeyError); a solution notebook plus such a cell scored 0/8. Such a reply
  or status message is now dropped (messages.READ_STRINGS), any other gets an empty status, "transient" is removed.
- 06-opaque-class-names (/work/redteam19/06_opaque_class_names): one notebook's answers of 64 unknown types renamed
  every later notebook's new answer type "object" in its feedback, in a class run (one process); no marks changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_redteam_default_round2 import needs_bwrap, run_bwrap


def assert_dropped_not_the_end_of_the_run(tmp_path: Path, hostile_cell: str) -> None:
    """`hostile_cell` run between two answer cells in a bubblewrap kernel: the cells after it run and count, and the
    grader neither failed on it ('could not be run') nor stopped the run at it (kernel.run_in_kernel's note)."""
    problems: list[str] = []
    cells = ["answer_x = 1", hostile_cell, "answer_x = 2"]
    answers = run_bwrap(cells, tmp_path, problems, timeout=90, cell_timeout=30)
    assert answers == {"answer_x": 2}, (answers, problems)  # the cells after it ran and counted
    assert not any("could not be run" in p or "failed on the kernel's messages" in p for p in problems), problems


_KERNEL = "_k = get_ipython().kernel\n"
#: the shell socket is a ROUTER: its first frame is the grader's routing identity, which zmq strips
_UNDELIMITED = {
    "iopub": _KERNEL + "_k.iopub_socket.send_multipart([b'not a jupyter message'])\nimport time; time.sleep(1)",
    "shell": _KERNEL
    + "_k.shell_stream.send_multipart([*_k._parent_ident['shell'], b'not a jupyter message'])\n"
    + "import time; time.sleep(1)",
}


#: messages of types the grader reads whose content nbclient reads without checking: a stream whose "transient"
#: is not an object (nbclient calls transient.get), and an execute_reply for the running cell without a "status"
#: (nbclient reads content["status"]), or any other message for it on shell (nbclient takes any shell message whose
#: parent is the cell as its reply); each raised in the grader and ended the run (04-unchecked-content)
_UNCHECKED = {
    "transient": _KERNEL
    + "_k.session.send(_k.iopub_socket, 'stream', {'name': 'stdout', 'text': '', 'transient': 1}, "
    + "_k.get_parent('shell'))\nimport time; time.sleep(1)",
    "stream-on-shell": _KERNEL
    + "_k.session.send(_k.shell_stream, 'stream', {'name': 'stdout', 'text': 'x'}, _k.get_parent('shell'), "
    + "ident=_k._parent_ident['shell'])\nimport time; time.sleep(1)",
    "no-status": _KERNEL
    + "_k.session.send(_k.shell_stream, 'execute_reply', {'ename': 'x'}, _k.get_parent('shell'), "
    + "ident=_k._parent_ident['shell'])\nimport time; time.sleep(1)",
}


#: 03's messages without a delimiter and 04's that nbclient cannot read, by name
_HOSTILE = {**{f"undelimited-{k}": v for k, v in _UNDELIMITED.items()}, **_UNCHECKED}


@needs_bwrap
@pytest.mark.parametrize("shape", sorted(_HOSTILE))
def test_a_message_the_grader_cannot_read_is_dropped_not_the_end_of_the_run(tmp_path: Path, shape: str):
    assert_dropped_not_the_end_of_the_run(tmp_path, _HOSTILE[shape])


def test_a_notebooks_unknown_types_do_not_rename_the_next_notebooks_answers():
    """06-opaque-class-names: a class run decodes every notebook's answers in one process, and the OpaqueAnswer classes
    (one per type name, at most MAX_OPAQUE_CLASSES) were shared by all: a notebook whose answers named 64 unknown types
    filled them, and every later notebook's answer of a type not seen before (a complex number) was "an answer of type
    object" in its feedback. Each snapshot now has classes of its own."""
    from distlab.grading import answers

    flood = {
        f"answer_q{i}": {"t": "seq", "v": [{"t": "other", "type": f"junk{i}_{j}"} for j in range(9)]}
        for i in range(1, 9)
    }
    answers.decode_answers(flood)
    got = answers.decode_answers({"answer_q1": {"t": "other", "type": "complex_rt19"}})
    assert type(got["answer_q1"]).__name__ == "complex_rt19", type(got["answer_q1"])


@needs_bwrap
def test_any_other_failure_on_the_kernels_messages_keeps_the_answers_read(tmp_path: Path, monkeypatch):
    """The class of 03 and 04, by construction: whatever else the kernel's messages make nbclient raise ends the run
    at that cell with the grader's note, and the answers read before it count (before, the whole run was lost: 'the
    notebook could not be run', 0 marks). Stood in for by a failure in the second cell's run."""
    from distlab.grading import kernel

    real = kernel._run_student_cell

    def failing(kernel_, number, source, problems):
        if number == 2:
            raise AttributeError("'int' object has no attribute 'get'")  # what 04's transient raised in nbclient
        return real(kernel_, number, source, problems)

    monkeypatch.setattr(kernel, "_run_student_cell", failing)
    problems: list[str] = []
    answers = run_bwrap(["answer_x = 1", "answer_x = 2", "answer_x = 3"], tmp_path, problems, timeout=90)
    assert answers == {"answer_x": 1}, (answers, problems)
    (said,) = [p for p in problems if "failed on the kernel's messages" in p]
    assert "code cell 2 (AttributeError)" in said and "answers read before it count" in said, said
