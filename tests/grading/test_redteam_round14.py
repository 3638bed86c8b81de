"""Red team round 14: the default grader run as root (bubblewrap), single and class grading. Evidence of each attack
is in the round's notes (NN-name); the tests here assert the behaviour wanted and failed before its fix.

- 04-reply-dropped-as-a-loop: a cell whose execute_reply is 64 kB to 8 MB (an exception message that long; the relay
  passes it, the grader's bounded decoding drops it) waited for its time limit and was reported "ran longer than its
  time limit (15 s) and was interrupted (an infinite loop?)": the grader's own words, false (the cell ended at once;
  a student's honest error with a 3 MB message read as a loop). Messages over the relay's 8 MB were already said to
  be dropped; now these are too (messages.grading_session counts the execute_replies it drops).
"""

from __future__ import annotations

from pathlib import Path

from test_redteam_default_round2 import needs_bwrap, run_bwrap


@needs_bwrap
def test_a_reply_too_large_to_decode_is_said_dropped_not_a_loop(tmp_path: Path):
    problems: list[str] = []
    cells = ["answer_x = 1", "raise RuntimeError('x' * 3_000_000)", "answer_x = 2"]
    # cell_timeout 30: a 3 MB traceback takes the loaded 2-core CI machine more than 8 s to format and send (it was
    # reported as a time-out once); the check is what the grader says of the dropped reply, not how fast it comes
    answers = run_bwrap(cells, tmp_path, problems, timeout=90, cell_timeout=30)
    assert answers == {"answer_x": 2}, (answers, problems)  # the cells after it still ran and counted
    said = [p for p in problems if p.startswith("code cell 2 ")]
    assert len(said) == 1, problems
    assert "infinite loop" not in said[0], said
    assert "larger than the grader reads" in said[0] and "dropped" in said[0], said
