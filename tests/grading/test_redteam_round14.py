"""Red team round 14: the default grader run as root (bubblewrap), single and class grading. Evidence of each attack
is in the round's notes (NN-name); the tests here assert the behaviour wanted and failed before its fix.

- 04-reply-dropped-as-a-loop: a cell whose execute_reply is 64 kB to 8 MB (an exception message that long; the relay
  passes it, the grader's bounded decoding drops it) waited for its time limit and was reported "ran longer than its
  time limit (15 s) and was interrupted (an infinite loop?)": the grader's own words, false (the cell ended at once;
  a student's honest error with a 3 MB message read as a loop). Messages over the relay's 8 MB were already said to
  be dropped; now these are too (messages.grading_session counts the execute_replies it drops), and such a reply
  still ends its cell at once (it keeps its parent header), so no cell waits for its time limit for it.
"""

from __future__ import annotations

import time
from pathlib import Path

from test_redteam_default_round2 import needs_bwrap, run_bwrap


@needs_bwrap
def test_a_reply_too_large_to_decode_is_said_dropped_not_a_loop(tmp_path: Path):
    problems: list[str] = []
    cells = ["answer_x = 1", "raise RuntimeError('x' * 3_000_000)", "answer_x = 2"]
    # the dropped reply still ends its cell (it arrives with its parent header): nothing waits for the 60 s cell limit,
    # which on a loaded machine also ran into the after-time-out check's 5 s and said "did not respond" (twice in CI)
    started = time.monotonic()
    answers = run_bwrap(cells, tmp_path, problems, timeout=120, cell_timeout=60)
    assert time.monotonic() - started < 50, problems
    assert answers == {"answer_x": 2}, (answers, problems)  # the cells after it still ran and counted
    said = [p for p in problems if p.startswith("code cell 2 ")]
    assert len(said) == 1, problems
    assert "infinite loop" not in said[0] and "time limit" not in said[0], said
    assert "larger than the grader reads" in said[0] and "dropped" in said[0], said
