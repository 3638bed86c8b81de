"""Red team round 20: the round-19 changes (messages.grading_session's dropping and defaults, decode_answers' fresh
classes per snapshot, run_in_kernel's catch of any failure while the student's cells run), attacked as a student who
controls the kernel, in root bubblewrap mode.

01-parent-header-not-object: nbclient calls msg["parent_header"].get for every message it reads on shell and iopub,
whatever its parent; a message whose parent header (or header, or metadata) was a JSON array, number or string
passed grading_session whole, nbclient raised AttributeError, and the run ended at that cell (the round-19 catch:
the cells after it did not run, only the answers read before it counted). Such a message is now dropped like any
other the grader cannot read (messages.OBJECT_PARTS).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test_redteam_default_round2 import needs_bwrap
from test_redteam_round19 import assert_dropped_not_the_end_of_the_run

_KERNEL = "_k = get_ipython().kernel\nimport time\n"


def _forged(kind: str, socket: str, content: str, part: str, value: str) -> str:
    """A cell that sends, for itself, a message of `kind` on `socket` whose `part` is the JSON `value`."""
    ident = ", ident=_k._parent_ident['shell']" if socket == "shell_stream" else ""
    send = f"_k.session.send(_k.{socket}, _m{ident})" if socket == "shell_stream" else f"_k.{socket}.send_multipart("
    if socket != "shell_stream":
        send += "_k.session.serialize(_m))"
    return (
        _KERNEL
        + f"_m = _k.session.msg({kind!r}, {content}, parent=_k.get_parent('shell'))\n"
        + f"_m[{part!r}] = {value}\n"
        + f"{send}\n"
        + "time.sleep(1)"
    )


_SHAPES = {
    "iopub-parent-list": _forged("stream", "iopub_socket", "{'name': 'stdout', 'text': 'x'}", "parent_header", "[]"),
    "iopub-parent-number": _forged("stream", "iopub_socket", "{'name': 'stdout', 'text': 'x'}", "parent_header", "1"),
    # nbclient does not read metadata (this one passed before too): a guard that it stays dropped
    "iopub-metadata-list": _forged("stream", "iopub_socket", "{'name': 'stdout', 'text': 'x'}", "metadata", "[1]"),
    "shell-parent-string": _forged("execute_reply", "shell_stream", "{'status': 'ok'}", "parent_header", "'x'"),
    # an execute_reply too large to decode keeps its header and parent header (grading_session): those are read too
    "shell-large-reply-parent-list": _forged(
        "execute_reply", "shell_stream", "{'status': 'ok', 'x': 'y' * 100_000}", "parent_header", "[]"
    ),
}


@needs_bwrap
@pytest.mark.parametrize("shape", sorted(_SHAPES))
def test_a_message_whose_parts_are_not_objects_is_dropped_not_the_end_of_the_run(tmp_path: Path, shape: str):
    assert_dropped_not_the_end_of_the_run(tmp_path, _SHAPES[shape])
