"""Class grading integrity (issue 28): rows, identities, the authenticated journal, CSV injection, --trusted.

Each test is an attack a hostile class tried on the class runner; each failed on the runner before the fix.
The grader is replaced by a stand-in (grade_one) where the attack is on the runner, not on the kernel.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import stat

import pytest

from class_helpers import SECRET, stand_in_grade, write_roster
from distlab.errors import ConfigurationError
from distlab.grading import classroom, variants
from distlab.grading.report import NotebookGrade
from distlab.lessons.variants import lesson_variant


def _grader(calls, points=0.0):
    """A grade_notebook stand-in: q1 gets `points` of 1, q2 none; the student is the first identity given."""

    def grade_one(path, identity=None, **options):
        calls.append(str(path))
        return stand_in_grade(path, identity, points, unanswered=("q2",))

    return grade_one


def _notebook(path, text="{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---- rows ---------------------------------------------------------------------------------------------------


def test_three_files_of_one_name_in_three_folders_are_three_rows(tmp_path, monkeypatch):
    # the attack: s1/x.ipynb s2/x.ipynb s3/x.ipynb were keyed by the file name, so all three shared one row
    for s in ("s1", "s2", "s3"):
        _notebook(tmp_path / s / "x.ipynb", json.dumps({"who": s}))
    monkeypatch.chdir(tmp_path)
    calls = []
    report = classroom.grade_class(
        ["s1/x.ipynb", "s2/x.ipynb", "s3/x.ipynb"], tmp_path / "g", progress=False, grade_one=_grader(calls)
    )
    rows = list(csv.DictReader((tmp_path / "g" / "results.csv").open()))
    assert [r["notebook"] for r in rows] == ["s1/x.ipynb", "s2/x.ipynb", "s3/x.ipynb"]
    assert len(calls) == 3 and len(report.notebooks) == 3


def test_a_notebook_given_twice_is_refused(tmp_path, monkeypatch):
    _notebook(tmp_path / "s1" / "x.ipynb")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="given twice"):
        classroom.collect(["s1/x.ipynb", "./s1/x.ipynb"])
    with pytest.raises(ConfigurationError, match="given twice"):
        classroom.collect(["s1", "s1/x.ipynb"])  # a folder and a file in it


def test_two_notebooks_of_one_student_are_both_flagged_never_merged(tmp_path):
    # alice's folder holds her notebook and a copy: two rows, each flagged, never summed. One kernel per student
    # and lesson (test_redteam_class: an upload set must not multiply the kernels): the exercise's own file name
    # is graded, the copy is listed with no points and the reason
    _notebook(tmp_path / "class" / "alice" / "01_memory_wall.ipynb", '{"a": 1}')
    _notebook(tmp_path / "class" / "alice" / "01_memory_wall (1).ipynb", '{"a": 2}')
    _notebook(tmp_path / "class" / "bob" / "01_memory_wall.ipynb", '{"b": 1}')
    calls: list = []
    report = classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=_grader(calls, 1.0))
    assert len(calls) == 2  # alice's 01_memory_wall.ipynb and bob's
    rows = {r["notebook"]: r for r in csv.DictReader((tmp_path / "g" / "results.csv").open())}
    assert len(rows) == 3
    flagged = {k for k, r in rows.items() if r["flagged"]}
    assert flagged == {"class/alice/01_memory_wall.ipynb", "class/alice/01_memory_wall (1).ipynb"}
    assert {k: r["score"] for k, r in rows.items()} == {
        "class/alice/01_memory_wall.ipynb": "1.0",
        "class/alice/01_memory_wall (1).ipynb": "0.0",  # not run, not summed into alice's row
        "class/bob/01_memory_wall.ipynb": "1.0",
    }
    data = json.loads((tmp_path / "g" / "results.json").read_text())
    problems = {n["path"].split("class/")[1]: n["problems"] for n in data["notebooks"]}
    assert any(p.startswith("flagged") for p in problems["alice/01_memory_wall.ipynb"])
    assert any(p.startswith("refused to run") for p in problems["alice/01_memory_wall (1).ipynb"])
    assert problems["bob/01_memory_wall.ipynb"] == []
    assert report.score == 2.0


# ---- identity -----------------------------------------------------------------------------------------------


def test_a_name_with_a_newline_and_a_sid_does_not_file_the_grade_under_another_student(tmp_path):
    # the attack: Gradescope writes the student's chosen name into submission_metadata.yml; the line reader
    # took the ":sid: victim" inside the (quoted, multi-line) name for a second submitter
    export = tmp_path / "export"
    _notebook(export / "submission_1" / "01_memory_wall.ipynb")
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n"
        "  :submitters:\n"
        '  - :name: "Mallory\\n    :sid: victim"\n'
        "    :sid: '111'\n"
        "    :email: mallory@uni.example\n"
        "  :created_at: 2026-11-01 10:00:00.000000000 +00:00\n"
    )
    [found] = classroom.collect([export], export=True)
    assert found.identity == ("111", "mallory@uni.example")
    # a literal block holding a line that looks like a key stays a name, too
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: |\n      Mallory\n      :sid: victim\n    :sid: 111\n"
    )
    assert classroom.collect([export], export=True)[0].identity == ("111",)


def test_a_ruby_tagged_export_is_read_as_plain_data_and_a_broken_one_is_refused(tmp_path):
    export = tmp_path / "export"
    _notebook(export / "submission_1" / "01_memory_wall.ipynb")
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :sid: '7'\n  :score: !ruby/object:BigDecimal 18:0.1e1\n"
    )
    assert classroom.collect([export], export=True)[0].identity == ("7",)
    (export / "submission_metadata.yml").write_text("submission_1: [unclosed\n")
    with pytest.raises(ConfigurationError, match="submission_metadata.yml"):
        classroom.collect([export], export=True)


def test_with_a_roster_the_notebook_never_says_whose_it_is(tmp_path):
    # the attack: a notebook in a flat folder (no per-student folder, no export) carrying alice's variant
    # block was graded as alice's; the notebook is the student's to write, so it cannot name its owner
    roster_csv, secret = write_roster(tmp_path)
    roster = variants.load_roster(roster_csv, SECRET)
    policy = variants.VariantPolicy(roster)
    seed = roster.seed("memory_wall", "alice")
    metadata = {"distlab": {"lesson": "memory_wall", "variant": {"student": "alice", "seed": seed}}}
    grade = NotebookGrade("x.ipynb", "memory_wall", [], [])
    assert policy(grade, metadata, lesson_variant("memory_wall", None), identity=None) is None
    assert grade.student == "" and any("names no student" in p for p in grade.problems)
    # the same notebook in alice's folder is hers
    grade = NotebookGrade("alice/x.ipynb", "memory_wall", [], [])
    assert policy(grade, metadata, lesson_variant("memory_wall", None), identity=("alice",)) is not None
    assert grade.student == "alice"


# ---- the journal --------------------------------------------------------------------------------------------


def _journal_run(tmp_path, points):
    calls = []
    classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=_grader(calls, points))
    return calls, json.loads((tmp_path / "g" / "results.json").read_text())


def test_a_forged_journal_record_and_a_broken_line_do_not_turn_zero_into_full_marks(tmp_path):
    nb = _notebook(tmp_path / "class" / "mallory" / "01_memory_wall.ipynb", '{"cells": []}')
    calls, data = _journal_run(tmp_path, 0.0)
    assert data["score"] == 0.0 and len(calls) == 1
    journal = tmp_path / "g" / classroom.JOURNAL
    good = json.loads(journal.read_text().splitlines()[0])
    forged = json.loads(json.dumps(good["record"]))
    for q in forged["grade"]["questions"]:
        q["points"], q["status"] = q["max_points"], "correct"
    forged["grade"]["score"] = forged["grade"]["max_score"]
    digest = classroom.file_digest(nb)
    assert forged["sha256"] == digest  # the forger knows the file's hash: it is their file
    with journal.open("a") as f:
        f.write(json.dumps({"record": forged, "mac": "0" * 64}) + "\n")  # a MAC they cannot compute
        f.write(json.dumps(forged) + "\n")  # the old journal's unsigned format
        f.write('{"record": {"key": "class/mallory/01_memory_wall.ipynb"')  # a broken line
    calls, data = _journal_run(tmp_path, 0.0)
    assert data["score"] == 0.0
    assert calls == []  # the authentic record still stands; nothing forged replaced it


def test_an_edited_journal_line_is_graded_again_never_trusted(tmp_path):
    _notebook(tmp_path / "class" / "mallory" / "01_memory_wall.ipynb", '{"cells": []}')
    _journal_run(tmp_path, 0.0)
    journal = tmp_path / "g" / classroom.JOURNAL
    journal.write_text(journal.read_text().replace('"points": 0.0', '"points": 1.0'))
    calls, data = _journal_run(tmp_path, 0.0)
    assert len(calls) == 1 and data["score"] == 0.0


def test_the_journal_key_is_private_to_the_grader(tmp_path):
    _notebook(tmp_path / "class" / "a" / "01_memory_wall.ipynb")
    _journal_run(tmp_path, 0.0)
    key = tmp_path / "g" / classroom.JOURNAL_KEY
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    # another output folder gets another key, so a line copied between folders does not verify
    (tmp_path / "other").mkdir()
    assert classroom.journal_key(tmp_path / "other") != key.read_bytes()
    # a key file planted as a link to a key the attacker knows is refused, not followed
    (tmp_path / "third").mkdir()
    os.symlink(key, tmp_path / "third" / classroom.JOURNAL_KEY)
    with pytest.raises(ConfigurationError, match="not a journal key"):
        classroom.journal_key(tmp_path / "third")


# ---- the CSV ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r", "\n"])
def test_csv_cells_a_spreadsheet_would_run_are_text(tmp_path, start):
    # the attack: a student folder named "\t=cmd|..." (tab and CR were not quoted before)
    name = f"{start}HYPERLINK(1)"
    record = {
        "key": f"{name}/x.ipynb",
        "identity": [name],
        "grade": {"score": 0.0, "max_score": 1.0, "problems": [name], "questions": [], "student": name},
    }
    rows = list(csv.reader(classroom.results_csv([record]).splitlines(keepends=True)))
    cells = rows[1]
    # a formula character is quoted; a tab, CR or LF is escaped (a visible \t, \r, \n: no control character
    # reaches results.csv), so the cell starts with a backslash and no spreadsheet reads it as a formula
    shown = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}.get(start, "'" + start) + "HYPERLINK(1)"
    assert cells[0] == f"{shown}/x.ipynb" and cells[1] == shown
    assert all(not c or c[0] not in "=+-@\t\r\n" for c in cells)


# ---- --trusted ----------------------------------------------------------------------------------------------


def test_trusted_refuses_class_grading_and_says_why(tmp_path, capsys):
    from distlab.cli import main

    nb = _notebook(tmp_path / "class" / "a" / "01_memory_wall.ipynb")
    roster_csv, secret = write_roster(tmp_path)
    for extra in (
        [str(tmp_path / "class")],
        [str(nb), "--out", str(tmp_path / "g")],
        [str(nb), "--roster", str(roster_csv), "--secret-file", str(secret)],
    ):
        for flag in (["--trusted"], ["--sandbox", "audit"]):
            assert main(["grade", *extra, "--lesson", "memory_wall", *flag]) == 2
            err = capsys.readouterr().err
            assert "--trusted does not grade a class" in err and "audit hook only" in err
    assert not (tmp_path / "g").exists()
    with pytest.raises(ConfigurationError, match="does not grade a class"):
        classroom.grade_class([tmp_path / "class"], tmp_path / "g", sandbox="trusted", grade_one=_grader([]))


def test_container_mode_refuses_class_grading_too(tmp_path):
    # one container for a whole class runs every kernel as the grader's user: one notebook could read the others
    _notebook(tmp_path / "class" / "a" / "01_memory_wall.ipynb")
    with pytest.raises(ConfigurationError, match="--container does not grade a class"):
        classroom.grade_class([tmp_path / "class"], tmp_path / "g", sandbox="container", grade_one=_grader([]))
    assert not (tmp_path / "g").exists()


# ---- the class run's own robustness (red team, class mode: #30, #1's handler, the policy, stale files) ---------


def test_submission_metadata_with_out_is_our_error_not_a_type_error(tmp_path, capsys):
    # the red team's #30: --submission-metadata with --out passed identity= twice to grade_notebook (TypeError,
    # a traceback); one submitter for a whole class makes no sense, so it is refused with the reason
    from distlab.cli import main

    nb = _notebook(tmp_path / "class" / "a" / "01_memory_wall.ipynb")
    meta = tmp_path / "submission_metadata.json"
    meta.write_text(json.dumps({"users": [{"email": "a@uni.example", "id": 1}]}))
    code = main(["grade", str(nb), "--out", str(tmp_path / "g"), "--submission-metadata", str(meta)])
    assert code == 2
    assert "--submission-metadata" in capsys.readouterr().err
    with pytest.raises(ConfigurationError, match="not one identity for all"):
        classroom.grade_class([nb], tmp_path / "g2", identity=("a",), grade_one=_grader([]))


def test_a_notebook_whose_grading_fails_is_a_row_with_the_reason_and_the_class_goes_on(tmp_path):
    # grade_notebook "never raises for anything the file contains"; should a file still find a way (the red team
    # found two: a non-UTF-8 name and a seed with a lone surrogate), that notebook gets a row saying why and the
    # notebooks after it are graded
    for s in ("a", "b", "c"):
        _notebook(tmp_path / "class" / s / "01_memory_wall.ipynb", json.dumps({"who": s}))
    inner = _grader([], 1.0)

    def grade_one(path, identity=None, **options):
        if identity == ("b",):
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return inner(path, identity=identity, **options)

    report = classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=grade_one)
    problems = {g.path.split("class/")[1]: g.problems for g in report.notebooks}
    assert len(problems) == 3 and report.score == 2.0  # a and c graded (1 point each), b none
    assert problems["b/01_memory_wall.ipynb"][0].startswith("could not be graded (UnicodeEncodeError")
    assert (tmp_path / "g" / "results.json").is_file()


def test_a_grade_given_under_other_limits_or_sandbox_is_graded_again(tmp_path):
    # the journal record's policy: the same file graded with another time limit (or sandbox) is not "done"
    _notebook(tmp_path / "class" / "a" / "01_memory_wall.ipynb")
    calls: list = []
    for timeout, expected in ((300.0, 1), (300.0, 0), (30.0, 1), (30.0, 0)):
        before = len(calls)
        classroom.grade_class(
            [tmp_path / "class"], tmp_path / "g", progress=False, timeout=timeout, grade_one=_grader(calls)
        )
        assert len(calls) - before == expected, (timeout, expected)


def test_a_roster_id_or_email_that_is_not_ascii_is_refused(tmp_path):
    # compared byte for byte (Roster.find): a roster holding a look-alike is the instructor's error, said so
    roster = tmp_path / "roster.csv"
    for row in ("k\u0430te,kate@uni.example", "kate,\u212aate@uni.example"):
        roster.write_text("id,email\n" + row + "\n", encoding="utf-8")
        with pytest.raises(ConfigurationError, match="not plain ASCII"):
            variants.load_roster(roster, SECRET)


def test_gradescope_files_of_notebooks_no_longer_given_are_removed(tmp_path):
    # gradescope/ is rebuilt on each run (each file created with O_EXCL, named by the key's full SHA-256)
    for s in ("a", "b"):
        _notebook(tmp_path / "class" / s / "01_memory_wall.ipynb")
    classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=_grader([]))
    assert len(os.listdir(tmp_path / "g" / "gradescope")) == 2
    shutil.rmtree(tmp_path / "class" / "b")  # (an empty folder b would get a row: "no notebook found")
    classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=_grader([]))
    [name] = os.listdir(tmp_path / "g" / "gradescope")
    assert name.split("-")[0] == hashlib.sha256(b"class/a/01_memory_wall.ipynb").hexdigest()


def test_an_unknown_lesson_is_our_error_once_and_a_configuration_error_from_one_notebook_is_its_row(tmp_path):
    for s in ("a", "b"):
        _notebook(tmp_path / "class" / s / "01_memory_wall.ipynb")
    with pytest.raises(ConfigurationError, match="not a graded lesson"):
        classroom.grade_class([tmp_path / "class"], tmp_path / "g", lesson="no_such_lesson", grade_one=_grader([]))
    inner = _grader([], 1.0)

    def grade_one(path, identity=None, **options):  # e.g. a lesson module the notebook names fails to import
        if identity == ("a",):
            raise ConfigurationError("distlab.lessons.x could not be imported")
        return inner(path, identity=identity, **options)

    report = classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=grade_one)
    assert [len(g.problems) for g in report.notebooks] == [1, 0] and report.score == 1.0
