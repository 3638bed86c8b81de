"""Grading a class (issue 15): a folder or an export, resumable, CSV/JSON/Gradescope outputs, summary and histogram."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import zipfile

import pytest

from class_helpers import ROOT, SECRET, autograder_env, needs_unprivileged_python, solve, write_roster
from distlab.grading import classroom, gradescope, variants
from distlab.grading.report import NotebookGrade, QuestionGrade


def _fake_grade(calls, stop_at=None):
    """A grade_notebook stand-in: q1 correct when the folder name has "good", else not; records its calls."""

    def grade_one(path, identity=None, **options):
        calls.append(path.name)
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt
        ok = "good" in path.parent.name
        return NotebookGrade(
            str(path),
            "memory_wall",
            [
                QuestionGrade("q1", "correct" if ok else "incorrect", float(ok), 1.0, "fb", "p"),
                QuestionGrade("q2", "not attempted", 0.0, 1.0, "not attempted", "p"),
            ],
            ['=HYPERLINK("x")'] if not ok else [],
            sandbox="audit-hook",
            seconds=0.5,
            student=(identity or ("",))[0],
        )

    return grade_one


@pytest.fixture
def folder(tmp_path):
    sub = tmp_path / "submitted"
    for name in ("a_good", "b_bad", "c_good", "d_bad", "e_good"):
        (sub / name).mkdir(parents=True)
        (sub / name / "01_memory_wall.ipynb").write_text(json.dumps({"cells": [], "n": name}))
    (sub / "a_good" / ".ipynb_checkpoints").mkdir()
    (sub / "a_good" / ".ipynb_checkpoints" / "x.ipynb").write_text("{}")  # skipped
    return sub


def _keys(calls):
    return sorted(calls)


def test_an_interrupted_class_resumes_and_skips_what_is_done(folder, tmp_path):
    out = tmp_path / "grades"
    calls = []
    with pytest.raises(KeyboardInterrupt, match="run the same command again"):
        classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade(calls, stop_at=3))
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [r["student"] for r in rows] == ["a_good", "b_bad"]  # the two finished before Ctrl-C are kept
    assert (out / "results.json").is_file() and (out / "histogram.png").is_file()
    calls = []
    report = classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade(calls))
    assert len(calls) == 3  # only c, d, e
    assert len(report.notebooks) == 5
    calls = []
    classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade(calls))
    assert calls == []  # everything done
    (folder / "b_bad" / "01_memory_wall.ipynb").write_text(json.dumps({"cells": [], "resubmitted": True}))
    report = classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade(calls))
    assert len(calls) == 1 and len(report.notebooks) == 5  # a changed file is graded again, once


def test_a_crash_mid_line_loses_only_that_line(folder, tmp_path):
    out = tmp_path / "grades"
    classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade([]))
    journal = out / classroom.JOURNAL
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # torn last write
    calls = []
    classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade(calls))
    assert calls == ["01_memory_wall.ipynb"]


def test_the_outputs_csv_json_gradescope_summary_histogram(folder, tmp_path):
    out = tmp_path / "grades"
    report = classroom.grade_class([folder], out, progress=False, grade_one=_fake_grade([]))
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["student"], r["score"], r["q1"], r["q2"]) for r in rows][:2] == [
        ("a_good", "1.0", "1.0", "0.0"),
        ("b_bad", "0.0", "0.0", "0.0"),
    ]
    assert rows[1]["problems"].startswith("'=")  # a formula in a problem is quoted for spreadsheets
    data = json.loads((out / "results.json").read_text())
    assert data["score"] == 3.0 and data["max_score"] == 10.0 and len(data["notebooks"]) == 5
    assert data == report.to_json()
    scopes = sorted((out / "gradescope").glob("*.json"))
    assert len(scopes) == 5
    for path in scopes:
        result = json.loads(path.read_text())
        assert set(result) >= {"score", "tests", "output"} and len(result["tests"]) == 2
    summary = (out / "summary.txt").read_text()
    assert "5 notebooks; mean score 30.0%" in summary
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [(r["question"], r["correct"], r["wrong"], r["not_attempted"]) for r in rows] == [
        ("q1", "3", "2", "0"),
        ("q2", "0", "0", "5"),
    ]
    png = (out / "histogram.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000


def test_the_progress_bar_is_plain_text(folder, tmp_path):
    stream = io.StringIO()
    classroom.grade_class([folder], tmp_path / "g", stream=stream, grade_one=_fake_grade([]))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5 and lines[-1].startswith("[" + "#" * 30 + "] 5/5")
    assert "s/notebook" in lines[0] and "ETA" in lines[0]


def test_a_gradescope_export_names_each_submitter(tmp_path):
    export = tmp_path / "export"
    for n, _sid in ((1, "111"), (2, "222")):
        (export / f"submission_{n}").mkdir(parents=True)
        (export / f"submission_{n}" / "01_memory_wall.ipynb").write_text("{}")
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: Ann\n    :sid: '111'\n    :email: ann@uni.example\n"
        "  :created_at: 2026-11-01\nsubmission_2:\n  :submitters:\n  - :name: Ben\n    :sid: '222'\n"
        "    :email: ben@uni.example\n"
    )
    found = classroom.collect([export], export=True)
    assert [(s.key, s.identity) for s in found] == [
        ("export/submission_1/01_memory_wall.ipynb", ("111", "ann@uni.example")),
        ("export/submission_2/01_memory_wall.ipynb", ("222", "ben@uni.example")),
    ]


def test_what_is_not_a_regular_file_is_never_read_by_the_class_runner(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    os.mkfifo(folder / "fifo.ipynb")  # reading it would block forever
    (folder / "zero.ipynb").symlink_to("/dev/zero")  # reading it would never end
    found = classroom.collect([folder])
    assert [s.key for s in found] == ["class/fifo.ipynb", "class/zero.ipynb"]
    assert {classroom.file_digest(s.path) for s in found} == {"not-a-file"}
    calls = []
    classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=_fake_grade(calls))
    assert len(calls) == 2  # each handed to the grader, which refuses it with the reason


def test_the_cli_grades_a_class_with_variants(tmp_path, capsys):
    """Real kernels: two students' own notebooks, and one copied from a classmate (refused)."""
    from distlab.cli import main

    roster_csv, secret = write_roster(tmp_path, ids=("alice", "bob"))
    roster = variants.load_roster(roster_csv, SECRET)
    variants.build_variants(roster, ROOT / "exercises", tmp_path / "submitted", ["memory_wall"])
    for sid in ("alice", "bob"):
        solve(tmp_path / "submitted" / sid / "01_memory_wall.ipynb", "memory_wall", roster.seed("memory_wall", sid))
    shutil.copy(
        tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb",
        tmp_path / "submitted" / "bob" / "01_memory_wall_copy.ipynb",
    )
    assert (
        main(
            [
                "grade",
                str(tmp_path / "submitted"),
                "--out",
                str(tmp_path / "grades"),
                "--lesson",
                "memory_wall",
                "--roster",
                str(roster_csv),
                "--secret-file",
                str(secret),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "1 notebook refused" in capsys.readouterr().out
    rows = {r["notebook"]: r for r in csv.DictReader((tmp_path / "grades" / "results.csv").open())}
    assert {k: v["score"] for k, v in rows.items()} == {
        "submitted/alice/01_memory_wall.ipynb": "8.0",
        "submitted/bob/01_memory_wall.ipynb": "8.0",
        "submitted/bob/01_memory_wall_copy.ipynb": "0.0",
    }


def _autograder(tmp_path, **options):
    zip_path = gradescope.build_autograder("memory_wall", tmp_path / "autograder.zip", timeout=120, **options)
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
        assert {"setup.sh", "run_autograder", "distlab-src/pyproject.toml"} <= set(zf.namelist())
        assert zf.getinfo("run_autograder").external_attr >> 16 & 0o111  # executable
    (root / "submission").mkdir()
    return root


def _run_autograder(root):
    env = autograder_env(root)
    subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], env=env, check=True, timeout=300, capture_output=True
    )
    return json.loads((root / "results" / "results.json").read_text())


@needs_unprivileged_python
def test_the_gradescope_run_script_grades_a_submission_laid_out_as_gradescope_does(tmp_path):
    roster_csv, secret = write_roster(tmp_path, ids=("alice", "bob"))
    root = _autograder(tmp_path, roster=roster_csv, secret_file=secret)
    roster = variants.load_roster(roster_csv, SECRET)
    variants.build_variants(roster, ROOT / "exercises", tmp_path / "v", ["memory_wall"])
    notebook = solve(
        tmp_path / "v" / "bob" / "01_memory_wall.ipynb", "memory_wall", roster.seed("memory_wall", "bob"), wrong=("q7",)
    )
    shutil.copy(notebook, root / "submission" / "my_work.ipynb")
    (root / "submission_metadata.json").write_text(
        json.dumps({"id": 1, "users": [{"email": "bob@uni.example", "id": 99, "name": "Bob"}]})
    )
    result = _run_autograder(root)
    assert result["score"] == 7.0
    assert [t["name"].split(":")[0] for t in result["tests"]] == [f"q{i}" for i in range(1, 9)]
    assert all({"score", "max_score", "name", "output", "status"} <= set(t) for t in result["tests"])
    assert [t["status"] for t in result["tests"]].count("failed") == 1


def test_the_gradescope_run_script_writes_results_even_when_grading_fails(tmp_path):
    root = _autograder(tmp_path)
    (root / "submission" / "answers.pdf").write_bytes(b"%PDF")  # no notebook uploaded
    result = _run_autograder(root)
    assert result["score"] == 0 and "could not grade" in result["output"] and result["tests"] == []


@needs_unprivileged_python
def test_the_gradescope_run_script_refuses_a_classmates_notebook(tmp_path):
    roster_csv, secret = write_roster(tmp_path, ids=("alice", "bob"))
    root = _autograder(tmp_path, roster=roster_csv, secret_file=secret)
    roster = variants.load_roster(roster_csv, SECRET)
    variants.build_variants(roster, ROOT / "exercises", tmp_path / "v", ["memory_wall"])
    alices = solve(
        tmp_path / "v" / "alice" / "01_memory_wall.ipynb", "memory_wall", roster.seed("memory_wall", "alice")
    )
    shutil.copy(alices, root / "submission" / "01_memory_wall.ipynb")
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"email": "bob@uni.example", "id": 7}]}))
    result = _run_autograder(root)
    assert result["score"] == 0 and "refused" in result["output"] and "'bob'" in result["output"]
