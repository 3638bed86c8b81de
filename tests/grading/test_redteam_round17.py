"""Red team round 17: the default grader run as root, single and class grading (evidence: /work/redteam17/NN_name).

- 04-ungradable-first: of a student's notebooks of one lesson the class runner grades one (one_per_student: the
  exercise file name first) and gives the others "refused to run", no points. The ranking looked at names only, so
  an entry that can never be graded (a link, a FIFO, a folder named like the exercise; an empty or truncated file)
  was chosen whenever it carried the exercise's name: the student's readable notebook under another name was then
  not run and the student scored 0 (measured: a FIFO `01_memory_wall.ipynb` beside the student's notebooks, every
  one of them "refused to run ... 01_memory_wall.ipynb was graded in its place", which got "not a regular file").
  A student only hurts their own row this way, but an honest upload does it too (a zip that stores the exercise
  as a link, a zero-byte save beside `01_memory_wall (1).ipynb`). Fixed: a notebook that can be read and parsed
  is always preferred to one that cannot; among those the name ranks as before.
"""

from __future__ import annotations

import os
import shutil

import pytest

from class_helpers import ROOT
from distlab.grading.class_submissions import collect, one_per_student

EXERCISE = ROOT / "exercises" / "01_memory_wall.ipynb"


def _unreadable(path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        os.symlink(EXERCISE, path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    else:  # a notebook cut short: not JSON
        path.write_bytes(EXERCISE.read_bytes()[:100])


@pytest.mark.parametrize("kind", ["fifo", "link", "folder", "empty", "truncated"])
def test_an_entry_that_cannot_be_graded_is_never_chosen_over_the_students_readable_notebook(tmp_path, kind):
    # 04-ungradable-first: mallory's folder holds an ungradable entry under the exercise's own name and her notebook
    # under another name of the lesson; the readable one must be the one graded (no "refused to run" for it)
    folder = tmp_path / "submitted" / "mallory"
    folder.mkdir(parents=True)
    _unreadable(folder / "01_memory_wall.ipynb", kind)
    shutil.copy(EXERCISE, folder / "memory_wall_final.ipynb")
    submissions = collect([tmp_path / "submitted"], lesson="memory_wall")
    ignored = one_per_student(submissions, "memory_wall")
    real = next(s for s in submissions if s.path.name == "memory_wall_final.ipynb")
    assert real.key not in ignored, ignored
    others = [s for s in submissions if s.key != real.key and s.notebook]
    assert all(ignored.get(s.key) == real for s in others), ignored


def test_the_exercise_name_still_ranks_first_among_readable_notebooks(tmp_path):
    # the fix keeps the documented order where every notebook can be read: the exercise file name first
    folder = tmp_path / "submitted" / "mallory"
    folder.mkdir(parents=True)
    shutil.copy(EXERCISE, folder / "01_memory_wall.ipynb")
    shutil.copy(EXERCISE, folder / "memory_wall_final.ipynb")
    submissions = collect([tmp_path / "submitted"], lesson="memory_wall")
    ignored = one_per_student(submissions, "memory_wall")
    assert [s.path.name for s in submissions if s.key not in ignored] == ["01_memory_wall.ipynb"]


@pytest.mark.parametrize("kind", ["fifo", "link", "empty"])
def test_the_gradescope_pick_never_takes_what_cannot_be_a_notebook_over_one_that_can(tmp_path, kind):
    # 04-ungradable-first, the Gradescope autograder's --one-notebook (upload.pick_notebook): the same ranking by name
    # picked a FIFO, a link or an empty file named 01_memory_wall.ipynb over the student's notebook. A cut-short file
    # is not told apart here (only lstat is asked, for each of up to PICK_ENTRIES entries), the class runner's is
    from distlab.grading.upload import pick_notebook

    _unreadable(tmp_path / "01_memory_wall.ipynb", kind)
    shutil.copy(EXERCISE, tmp_path / "memory_wall (1).ipynb")
    chosen, ignored, complete = pick_notebook([tmp_path], "memory_wall")
    assert chosen == tmp_path / "memory_wall (1).ipynb", (chosen, ignored)
    assert ignored == [tmp_path / "01_memory_wall.ipynb"] and complete


def test_a_shape_whose_product_is_too_long_to_write_is_a_reason_not_an_exception():
    # 01-check-cost (weak): parallelism_3d's ordered RanksQuestion wrote the product of the answer's entries into its
    # reason; 4,096 entries of 2**62 (an answer the decoder accepts) multiply to ~76,000 digits, past str()'s 4,300,
    # and check() raised ValueError (the grader caught it: "could not be checked"; a student at home got a traceback)
    from distlab.lessons.parallelism_3d import QUESTIONS

    ordered = [q for q in QUESTIONS.values() if getattr(q, "ordered", False)]
    assert ordered
    for q in ordered:
        result = q.check([2**62] * 4096)
        assert result.status == "incorrect" and "digits" in result.message, result.message
