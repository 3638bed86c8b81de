"""Red team round 27: the code round 26 added (exercises built by allow-list, variants renamed into place, the output
folder's lock, the walk below the folder given). Each test keeps the attack and what must hold.

01-exercise-cells-beside-the-allow-list (succeeded, fixed): round 26 allow-listed the notebook's and cells' metadata
and a markdown cell's attachments, but the cells themselves were copied: a raw cell passed whole (its BEGIN/END
SOLUTION lines unread, every attachment kept: JupyterLab stores an image pasted into a raw cell there), a code cell's
"attachments" and any key beside the schema's (a cell's or the notebook's) reached the exercise. Now every cell is
made anew with only what an exercise holds (build._exercise_cell), a raw cell's text read as markdown's, and the
notebook made anew (build.exercise_from_solution).
02-a-folder-where-the-variant-goes (succeeded, fixed): a student whose variants folder was theirs made a folder
under the exercise's name; the rename over it raised IsADirectoryError, `distlab exercises --variants` ended in a
traceback for the whole class, and the root-owned temporary file stayed in the student's folder. Now the temporary
file is removed whatever fails and the folder is named in a message (variants._write_variant).
03-the-lock-file (link and folder: traceback, fixed; FIFO: held): out/.lock as a link is never followed (O_NOFOLLOW)
but ended the run with a bare OSError, as did a folder there; now a message names it (journal.writing). A FIFO there
neither blocks the run nor lets a second one in.
04-odd-names-in-the-walk (held): a notebook whose name is not UTF-8 (b"\\xff\\xfe=cmd.ipynb"), one in a folder whose
name is not UTF-8, and one 250-character folders deep are each graded and get one row, their names escaped.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import warnings
from pathlib import Path

import nbformat
import pytest

from distlab.errors import ConfigurationError
from distlab.grading import build, classroom, journal, variants
from distlab.grading.grade import grade_notebook

V4 = nbformat.v4


def _written(nb) -> str:
    """The exercise as `distlab exercises` writes it."""
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbformat warns of keys beside the schema: they must not be there at all
        nbformat.write(nb, out)
    return out.getvalue()


def test_a_raw_cells_solution_block_is_read_as_markdowns():
    """01: a raw cell's nbgrader-style markers reached the exercise whole; now they are refused (as in markdown)."""
    nb = V4.new_notebook(cells=[V4.new_raw_cell("### BEGIN SOLUTION\nthe answer is 112 GB\n### END SOLUTION")])
    with pytest.raises(ConfigurationError, match="BEGIN/END SOLUTION outside a marker"):
        build.exercise_from_solution(nb)


def test_a_raw_cells_block_and_attachments_go_with_the_solution():
    """01: a raw cell's markdown block is replaced and only the attachments its text still shows are kept."""
    raw = V4.new_raw_cell(
        "Setup: attachment:setup.png\n<!-- BEGIN SOLUTION -->\n112 GB, see attachment:worked.png\n<!-- END SOLUTION -->",
        attachments={"worked.png": {"image/png": "V09SS0VE"}, "setup.png": {"image/png": "U0VUVVA="}},
    )
    text = _written(build.exercise_from_solution(V4.new_notebook(cells=[raw])))
    assert "112 GB" not in text and "V09SS0VE" not in text and "worked.png" not in text, text
    assert "U0VUVVA=" in text and build.MD_PLACEHOLDER in text


def test_keys_beside_the_schema_never_reach_the_exercise():
    """01: an image attached to a code cell, a key a cell or the notebook carries beside the schema's: none pass."""
    code = V4.new_code_cell("### BEGIN SOLUTION\nanswer_q1 = 112\n### END SOLUTION\nq1.check(answer_q1)")
    markdown = V4.new_markdown_cell("Why?")
    nb = V4.new_notebook(metadata={"distlab": {"lesson": "memory_wall"}})
    code["attachments"] = {"w.png": {"image/png": "TEVBSzE="}}
    code["outputs_backup"] = "LEAK2 112 GB"
    markdown["solution_notes"] = "LEAK3"
    nb.cells = [code, markdown]  # as nbformat.read gives a notebook beside its schema (it warns, and reads it)
    nb["answers"] = "LEAK4"
    exercise = build.exercise_from_solution(nb)
    text = _written(exercise)
    for leak in ("TEVBSzE=", "LEAK2", "LEAK3", "LEAK4", "112"):
        assert leak not in text, (leak, text)
    assert exercise.cells[0].source == "answer_q1 = None  # YOUR ANSWER HERE\nq1.check(answer_q1)"
    assert [c.id for c in exercise.cells] == [code.id, markdown.id]  # the build stays the same each time
    assert exercise.metadata == {"distlab": {"lesson": "memory_wall"}}


def test_a_cell_of_no_known_type_is_refused():
    """01: whatever is not a code, markdown or raw cell is not copied as it is."""
    nb = V4.new_notebook()
    nb.cells = [nbformat.from_dict({"cell_type": "heading", "source": "112", "metadata": {}, "id": "h"})]
    with pytest.raises(ConfigurationError, match="'heading' cell"):
        build.exercise_from_solution(nb)


def test_a_folder_where_the_variant_goes_is_named_and_leaves_nothing(tmp_path):
    """02: a folder under the exercise's name in the student's folder: a message, no temporary file left there."""
    (tmp_path / "v" / "mallory" / "01_memory_wall.ipynb").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="is a folder, not a notebook"):
        variants._write_variant(tmp_path / "v", "mallory", "01_memory_wall.ipynb", V4.new_notebook())
    assert os.listdir(tmp_path / "v" / "mallory") == ["01_memory_wall.ipynb"]


def test_a_link_or_folder_as_the_lock_is_named_never_followed(tmp_path):
    """03: out/.lock as a link to a file that does not exist yet, or as a folder: a message; nothing is created."""
    link, folder = tmp_path / "a", tmp_path / "b"
    link.mkdir()
    folder.mkdir()
    (link / journal.OUT_LOCK).symlink_to(tmp_path / "victim")
    (folder / journal.OUT_LOCK).mkdir()
    for out in (link, folder):
        with pytest.raises(ConfigurationError, match="output folder's lock"):
            with journal.writing(out):
                pass
    assert not (tmp_path / "victim").exists()


def test_a_fifo_as_the_lock_neither_blocks_nor_lets_two_in(tmp_path):
    """03: a FIFO in place of out/.lock: the run starts at once and a second one is still refused."""
    os.mkfifo(tmp_path / journal.OUT_LOCK)
    with journal.writing(tmp_path):
        with pytest.raises(ConfigurationError, match="another distlab grade"):
            with journal.writing(tmp_path):
                pass


def _notebook(path: Path, source: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cell = {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}
    nb = {"cells": [cell], "metadata": {"distlab": {"lesson": "memory_wall"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))


def test_names_that_are_not_utf8_or_are_long_are_graded_once_each(tmp_path):
    """04: odd bytes in a notebook's or a folder's name, and long folder names, each give one graded row."""
    folder = tmp_path / "class"
    _notebook(folder / "alice" / "01_memory_wall.ipynb", "answer_q1 = 1")
    _notebook(folder / "eve" / ("d" * 250) / ("e" * 250) / ("n" * 240 + ".ipynb"), "answer_q1 = 2")
    os.makedirs(os.fsencode(folder / "zed") + b"/\xc3(")
    os.makedirs(folder / "mallory")
    for name in (b"mallory/\xff\xfe=cmd.ipynb", b"zed/\xc3(/01_memory_wall.ipynb"):
        with open(os.fsencode(folder) + b"/" + name, "wb") as f:
            f.write((folder / "alice" / "01_memory_wall.ipynb").read_bytes())
    ran: list = []

    def run(raw, sources, questions, problems, **options):
        ran.append(sources)
        return {}

    grade_one = functools.partial(grade_notebook, run=run, sandbox="trusted")
    classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=grade_one, lesson="memory_wall")
    rows = list(csv.DictReader((tmp_path / "g" / "results.csv").open(encoding="utf-8")))
    assert len(rows) == len(ran) == 4 and not any(r["problems"] for r in rows), rows
    assert {r["notebook"] for r in rows if r["student"] in ("mallory", "zed")} == {
        "class/mallory/\\xff\\xfe=cmd.ipynb",
        "class/zed/\\xc3(/01_memory_wall.ipynb",
    }
