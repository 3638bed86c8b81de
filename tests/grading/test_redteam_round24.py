"""Red team round 24: class runs over time (the journal, resubmission, renamed and look-alike files), Gradescope
class exports (submission_metadata.yml) and notebook parsing. Each test keeps the attack and what must hold.

01-yaml-ids-as-text (succeeded, fixed): the export was read with YAML 1.1's implicit types, so an unquoted
":sid: 0123" became the int 83 (octal), "1:30" the int 90 (sexagesimal), "yes" True (dropped), "2001-12-14" a date
(dropped), and a 5,000-digit sid raised ValueError out of read_gradescope_export (not distlab's error: the class run
ended with a traceback). A submitter "0123" was then graded as roster student "83". Now every scalar tag (int, float,
bool, timestamp, binary, implicit or explicit "!!int") is read as the text written: an id is exactly its characters.
02-yaml-duplicate-keys (succeeded, fixed): a submission folder (or a submitter's ":sid:") given twice in the export
was read as the last one, silently, so one of two readings won unseen. Now a mapping whose own keys repeat is refused
(ConfigurationError naming the key).
03-yaml-tags-and-aliases (held): python/object tags are data (nothing constructed, no id read from them); an alias
bomb (9 levels of 10 aliases) is read at once as shared references and names nobody.
04-journal-other-secret-or-roster (held): a class run interrupted and resumed with another secret or another roster
grades every notebook again; the same secret and roster skip them.
05-journal-rename-and-forged-line (held): a notebook renamed between runs is graded afresh (its old record never
applies to the new name), a replaced one is graded again, and a file name holding a newline and a whole forged
journal line (a 1.0 grade) stays one line of the journal: the forged record is never trusted.
06-look-alike-names (held): one student's folder holding the exercise under names that differ only by case or by
Unicode normalisation (NFC / NFD) gets one kernel: the others are listed, not run.
07-notebook-cells (held): only code cells' sources are run; outputs that print answers, markdown and raw cells
holding code, a cell type "Code", attachments and a non-string source part are never run as answers; an nbformat 3
notebook (worksheets) is refused as not a notebook; a duplicated "cells" key is read as every JSON reader of the
grader reads it (the last), once.
08-odd-metadata (held): metadata naming a lesson with a list, a dict or a number, and a variant block with a seed
that is a dict, a list or a 10,000-character string, never crash the grader, and with a roster never pick numbers.
"""

from __future__ import annotations

import json
import os
import time
import unicodedata

import pytest

from class_helpers import SECRET, stand_in_grade, write_roster
from distlab.errors import ConfigurationError
from distlab.grading import classroom, journal, variants
from distlab.grading.class_submissions import one_per_student, read_gradescope_export
from distlab.grading.discover import identify_lesson
from distlab.grading.report import NotebookGrade
from distlab.grading.submission import parse_sources
from distlab.lessons.variants import lesson_variant


def _export(tmp_path, text: str):
    path = tmp_path / "submission_metadata.yml"
    path.write_text(text)
    return path


def _one(sid: str) -> str:
    return f"submission_1:\n  :submitters:\n  - :name: Mallory\n    :sid: {sid}\n"


@pytest.mark.parametrize(
    "written", ["0123", "1:30", "yes", "2001-12-14", "1e5", "0x1A", "!!int 0123", "1" * 5000, "+12_3"]
)
def test_an_export_id_is_the_text_written_never_a_yaml_number(tmp_path, written):
    """01: an unquoted sid is read as its characters (YAML 1.1 would make 0123 the int 83, a classmate's id), and a
    5,000-digit one is an id like any other, not a ValueError out of the reader."""
    found = read_gradescope_export(_export(tmp_path, _one(written)))
    expected = written.removeprefix("!!int ")
    assert found == {"submission_1": (expected,)}


def test_an_octal_looking_sid_is_not_graded_as_the_classmate_it_would_compute_to(tmp_path):
    """01: with a roster holding "83", a submitter whose sid is written 0123 is not student 83."""
    roster_file, _ = write_roster(tmp_path, ("83", "bob"))
    roster = variants.load_roster(roster_file, SECRET)
    found = read_gradescope_export(_export(tmp_path, _one("0123")))
    assert variants.students_of(roster, found["submission_1"]) == set()


@pytest.mark.parametrize(
    "text",
    [
        "submission_1:\n  :submitters:\n  - :sid: alice\nsubmission_1:\n  :submitters:\n  - :sid: bob\n",
        "submission_1:\n  :submitters:\n  - :sid: alice\n    :sid: bob\n",
        "submission_1:\n  :submitters:\n  - :sid: '1'\n    :sid: 1\n",
    ],
)
def test_an_export_with_a_key_given_twice_is_refused(tmp_path, text):
    """02: a folder or a field given twice is refused with the reason, never read as the last one silently."""
    with pytest.raises(ConfigurationError, match="given twice"):
        read_gradescope_export(_export(tmp_path, text))


def test_an_export_merge_key_still_reads(tmp_path):
    """02: a YAML merge (<<) is not a duplicate: the folder's own keys override the merged ones, as YAML says."""
    text = "base: &b {':submitters': [{':sid': bob}]}\nsubmission_1:\n  <<: *b\n  :created_at: x\n"
    assert read_gradescope_export(_export(tmp_path, text))["submission_1"] == ("bob",)


def test_export_tags_are_data_and_an_alias_bomb_is_cheap(tmp_path):
    """03: a python/object tag constructs nothing (no id from it); 10**9 aliased entries are read in under a
    second as shared references, and name nobody."""
    text = _one("!!python/object/apply:os.system ['touch PWNED']")
    assert read_gradescope_export(_export(tmp_path, text)) == {"submission_1": ()}
    assert not (tmp_path / "PWNED").exists()
    lines = ["a: &a [" + ",".join(["x"] * 10) + "]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)]
    lines.append("submission_1: {':submitters': *i}")
    started = time.monotonic()
    found = read_gradescope_export(_export(tmp_path, "\n".join(lines) + "\n"))
    assert time.monotonic() - started < 2 and found["submission_1"] == ()


# ---- the journal over time ---------------------------------------------------------------------------------------


def _grader(calls, points=0.0):
    def grade_one(path, identity=None, **options):
        calls.append(path.name)
        return stand_in_grade(path, identity, points)

    return grade_one


def _class(tmp_path, names=("alice", "bob")):
    for sid in names:
        nb = tmp_path / "class" / sid / "01_memory_wall.ipynb"
        nb.parent.mkdir(parents=True, exist_ok=True)
        nb.write_text(json.dumps({"cells": [], "metadata": {"who": sid}}))
    return tmp_path / "class"


def test_a_resumed_run_with_another_secret_or_roster_grades_again(tmp_path):
    """04: the journal's records under one secret and roster never stand for a run under another."""
    folder = _class(tmp_path)
    roster_file, _ = write_roster(tmp_path, ("alice", "bob"))
    other_file = tmp_path / "other.csv"
    other_file.write_text("id,email\nalice,alice@uni.example\nbob,bob@uni.example\nzed,zed@uni.example\n")

    def run(secret, roster_path):
        calls: list[str] = []
        policy = variants.VariantPolicy(variants.load_roster(roster_path, secret))
        classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=_grader(calls), variants=policy)
        return len(calls)

    assert run(SECRET, roster_file) == 2
    assert run(SECRET, roster_file) == 0  # resumed as it was: skipped
    assert run(b"another secret", roster_file) == 2
    assert run(b"another secret", other_file) == 2  # one more student: every seed's meaning may change
    assert run(SECRET, roster_file) == 2


def test_a_renamed_or_replaced_notebook_is_graded_again_and_a_forged_line_is_not_trusted(tmp_path):
    """05: records apply to the same name, bytes, policy and student only; a file name carrying a newline and a
    forged journal line stays inside one signed line."""
    folder = _class(tmp_path)
    calls: list[str] = []
    classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=_grader(calls))
    assert len(calls) == 2
    os.rename(folder / "alice" / "01_memory_wall.ipynb", folder / "alice" / "01_memory_wall (1).ipynb")
    (folder / "bob" / "01_memory_wall.ipynb").write_text(json.dumps({"cells": [], "metadata": {"v": 2}}))
    calls.clear()
    classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=_grader(calls))
    assert sorted(calls) == ["01_memory_wall (1).ipynb", "01_memory_wall.ipynb"]
    forged = {"record": {"key": "class/bob/01_memory_wall.ipynb", "grade": {"score": 1.0}}, "mac": "0" * 64}
    evil = folder / "carol" / ("x\n" + json.dumps(forged) + "\n01_memory_wall.ipynb").replace("/", "_")
    evil.parent.mkdir()
    evil.write_text("{}")
    calls.clear()
    classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=_grader(calls, 1.0))
    lines = (tmp_path / "g" / journal.JOURNAL).read_text(encoding="utf-8").splitlines()
    assert all(set(json.loads(line)) == {"record", "mac"} for line in lines)
    key = journal.journal_key(tmp_path / "g")
    records = journal.read_journal(tmp_path / "g" / journal.JOURNAL, key)
    assert records["class/bob/01_memory_wall.ipynb"]["grade"]["score"] == 0.0  # the forged 1.0 is not there
    assert len(calls) == 1 and len(records) == 4  # carol's notebook, once; alice's old and new names, bob


def test_look_alike_names_in_one_student_folder_get_one_kernel(tmp_path):
    """06: names differing by case or by NFC / NFD of one student: one is graded, the others listed."""
    folder = tmp_path / "class" / "alice"
    folder.mkdir(parents=True)
    name = "01_memory_wall_caf\u00e9.ipynb"
    names = ["01_memory_wall.ipynb", "01_MEMORY_WALL.ipynb", name, unicodedata.normalize("NFD", name)]
    assert len(set(names)) == 4
    for n in names:
        (folder / n).write_text(json.dumps({"cells": [], "metadata": {"distlab": {"lesson": "memory_wall"}}}))
    subs = classroom.collect([tmp_path / "class"])
    ignored = one_per_student(subs, None)
    assert len(subs) == 4 and len(ignored) == 3
    graded = [s for s in subs if s.key not in ignored]
    assert [s.path.name for s in graded] == ["01_memory_wall.ipynb"]


# ---- notebook parsing --------------------------------------------------------------------------------------------


def test_only_code_cells_sources_are_run(tmp_path):
    """07: outputs, markdown, raw, a "Code" cell, attachments and a source with a non-string part are not run."""
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "markdown", "source": "answer_q1 = 42", "attachments": {"a.py": {"text/x-python": "x"}}},
            {"cell_type": "raw", "source": ["answer_q2 = 1"]},
            {"cell_type": "Code", "source": "answer_q3 = 1"},
            {"cell_type": "code", "source": ["x = 1\n", 2]},
            {
                "cell_type": "code",
                "id": "../../etc",
                "source": ["y = ", "2"],
                "outputs": [{"output_type": "execute_result", "data": {"text/plain": "answer_q1 = 42"}}],
            },
        ],
    }
    problems: list[str] = []
    metadata, sources = parse_sources(json.dumps(nb).encode(), problems)
    assert sources == ["y = 2"]
    assert any("no readable source" in p for p in problems)


def test_an_nbformat3_notebook_is_not_a_notebook_and_cells_given_twice_are_read_once():
    """07: worksheets (nbformat 3) are refused with the reason; duplicated "cells" keys are read once (the last)."""
    v3 = {"nbformat": 3, "worksheets": [{"cells": [{"cell_type": "code", "input": "answer_q1 = 1"}]}]}
    problems: list[str] = []
    assert parse_sources(json.dumps(v3).encode(), problems) is None and "no list of cells" in problems[0]
    twice = b'{"cells": [{"cell_type": "code", "source": "a = 1"}], "cells": [{"cell_type": "code", "source": "b"}]}'
    assert parse_sources(twice, []) == (None, ["b"])


@pytest.mark.parametrize(
    "meta",
    [
        {"distlab": {"lesson": ["memory_wall"], "variant": {"seed": {"x": 1}, "student": "alice"}}},
        {"distlab": {"lesson": {"a": 1}, "variant": {"seed": ["0" * 16], "student": ["alice"]}}},
        {"distlab": {"lesson": 5, "variant": {"seed": "f" * 10_000, "student": "alice"}}},
        {"distlab": {"variant": ["alice", "0" * 16]}},
    ],
)
def test_odd_metadata_never_crashes_and_picks_no_numbers(tmp_path, meta):
    """08: the lesson comes from the file name when the metadata's is not text; with a roster no seed but the one
    issued is used, whatever type the notebook gives it."""
    assert identify_lesson(meta, "01_memory_wall.ipynb", []) == ("memory_wall", "file name")
    roster_file, _ = write_roster(tmp_path, ("alice", "bob"))
    policy = variants.VariantPolicy(variants.load_roster(roster_file, SECRET))
    questions = lesson_variant("memory_wall", None)
    grade = NotebookGrade("x.ipynb", "memory_wall", [], [])
    chosen = policy(grade, meta, questions, identity=("alice",))
    if variants.notebook_variant(meta) is None:
        issued = variants.load_roster(roster_file, SECRET).seed("memory_wall", "alice")
        assert chosen is not None and set(chosen) == set(lesson_variant("memory_wall", issued))
    else:
        assert chosen is None and any("refused" in p for p in grade.problems)
