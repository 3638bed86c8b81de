"""Red team, second round (issue 28): whose grade, which score, what the docs promise.

Each test reproduces an attack of /work/redteam2/<mode>/NN-name and asserts the secure behaviour; each FAILS on
the code the attack succeeded against. The kernel is replaced by a stand-in (grade_notebook's run=, or
distlab.grading.grade._run for the CLI) that answers what the test says: the attacks are on whose numbers a
notebook is graded against and what is written, not on the kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from class_helpers import SECRET, write_roster
from distlab.cli import main
from distlab.grading import grade as grade_module
from distlab.grading import variants
from distlab.grading.grade import grade_notebook
from distlab.lessons.variants import lesson_variant

IDS = ("alice", "bob", "mallory")


def _notebook(path: Path, variant: dict | None = None) -> Path:
    """A memory_wall exercise notebook (one code cell; the stand-in kernel answers), with `variant` in its metadata."""
    meta: dict = {"lesson": "memory_wall", **({"variant": variant} if variant is not None else {})}
    nb = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1"}],
        "metadata": {"distlab": meta},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


def _answers(seed: str | None):
    """A stand-in kernel whose notebook answers every question right for `seed` (None: the public numbers)."""
    expected = {f"answer_{n}": q.expected() for n, q in lesson_variant("memory_wall", seed).items()}

    def run(raw, sources, questions, problems, **options):
        return dict(expected)

    return run


@pytest.fixture
def roster(tmp_path):
    roster_csv, secret = write_roster(tmp_path, IDS)
    return variants.load_roster(roster_csv, variants.read_secret(secret))


# ---- default/04-env-secret-ignored -------------------------------------------------------------------------------


def test_the_secret_in_the_environment_is_used_as_the_secret_file_is(tmp_path, monkeypatch, roster):
    # default/04-env-secret-ignored: with the course key in $DISTLAB_VARIANT_SECRET (README: "or set
    # DISTLAB_VARIANT_SECRET"), `distlab grade alice/01_memory_wall.ipynb --lesson memory_wall` graded alice's upload
    # of the PUBLIC solution (textbook numbers, no variant block) 8/8 with no problem line, although her own numbers
    # differ on 5 of 8 questions. The environment's secret now puts variants in use exactly as --secret-file does.
    monkeypatch.setenv(variants.SECRET_ENV, SECRET.decode())
    public = _notebook(tmp_path / "alice" / "01_memory_wall.ipynb")
    out = tmp_path / "out.json"
    monkeypatch.setattr(grade_module, "_run", _answers(None))
    assert main(["grade", str(public), "--lesson", "memory_wall", "--trusted", "--json", str(out), "--quiet"]) == 0
    found = json.loads(out.read_text())
    assert found["score"] == 0, found
    assert any(p.startswith("refused") for p in found["notebooks"][0]["problems"]), found
    # alice's own variant, answered with her numbers: graded with them (the seed checked with the env's secret)
    seed = roster.seed("memory_wall", "alice")
    mine = _notebook(tmp_path / "alice2" / "01_memory_wall.ipynb", {"student": "alice", "seed": seed})
    monkeypatch.setattr(grade_module, "_run", _answers(seed))
    assert main(["grade", str(mine), "--lesson", "memory_wall", "--trusted", "--json", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["score"] == 8


def test_a_variant_notebook_graded_without_any_secret_is_refused_not_trusted(tmp_path, monkeypatch):
    # default/04-env-secret-ignored (the same hole, no secret at all): a variant notebook was graded against the seed
    # IT carries ("not verified"), so a student who writes an easy seed (or a classmate's) chose the numbers graded.
    # The seed 0000000000000000 below is nobody's issued seed; answered for it, it scored 8/8 on the old code.
    monkeypatch.delenv(variants.SECRET_ENV, raising=False)
    forged = _notebook(tmp_path / "01_memory_wall.ipynb", {"student": "alice", "seed": "0000000000000000"})
    out = tmp_path / "out.json"
    monkeypatch.setattr(grade_module, "_run", _answers("0000000000000000"))
    assert main(["grade", str(forged), "--lesson", "memory_wall", "--trusted", "--json", str(out), "--quiet"]) == 0
    found = json.loads(out.read_text())
    assert found["score"] == 0, found
    assert any("no instructor secret" in p for p in found["notebooks"][0]["problems"]), found


# ---- default/08-group-seed-nonascii-crash ------------------------------------------------------------------------


def test_a_non_ascii_seed_in_a_group_submission_is_a_problem_not_a_traceback(tmp_path, roster):
    # default/08-group-seed-nonascii-crash: metadata.distlab.variant.seed "é" in a group submission (alice and bob)
    # raised "TypeError: comparing strings with non-ASCII characters is not supported" out of hmac.compare_digest:
    # a traceback, no JSON, the other notebooks of the command line not graded. Now: refused, no points.
    nb = _notebook(tmp_path / "01_memory_wall.ipynb", {"student": "alice", "seed": "é"})
    grade = grade_notebook(
        nb,
        lesson="memory_wall",
        variants=variants.VariantPolicy(roster),
        identity=(("alice",), ("bob",)),
        run=_answers(None),
    )
    assert grade.score == 0 and grade.student == ""
    assert any("not the one issued to any of them" in p for p in grade.problems), grade.problems


# ---- container/15-group-sid-email-mismatch-unrefused, class/07-group-ids-conflict-not-checked -----------------


@pytest.mark.parametrize("carries", ["nothing", "alice's seed"])
def test_a_group_submitter_whose_ids_name_two_students_is_refused(tmp_path, roster, carries):
    # container/15 and class/07: users[0] = {sid "alice", email mallory's}: alone it is refused ("name 2 different
    # students"); in a group with bob, _group took Roster.find's first match and graded "once, for 'alice'" against
    # alice's numbers (q3: 32 GPUs, 13B), mallory's name gone from the output. Refused as for one submitter now.
    seed = roster.seed("memory_wall", "alice")
    nb = _notebook(
        tmp_path / "01_memory_wall.ipynb", {"student": "alice", "seed": seed} if carries != "nothing" else None
    )
    grade = grade_notebook(
        nb,
        lesson="memory_wall",
        variants=variants.VariantPolicy(roster),
        identity=(("alice", "mallory@uni.example"), ("bob", "bob@uni.example")),
        run=_answers(seed),
    )
    assert grade.score == 0 and grade.student == "", (grade.score, grade.student, grade.problems)
    assert any("'alice', 'mallory@uni.example'" in p and "2 different students" in p for p in grade.problems)


# ---- container/07-group-no-variant-first-named (and class/07's second half) --------------------------------------


def test_a_group_notebook_without_a_variant_is_filed_under_nobody(tmp_path, roster):
    # container/07-group-no-variant-first-named: users [alice, mallory], the public exercise (no variant block):
    # "graded once, for 'alice' (the notebook carries no variant)" -- the first one named, whose numbers then showed
    # in the feedback (q3: 32 GPUs, 13B; mallory's own: 8 GPUs, 175B). Whose numbers it answers is not known: refused.
    nb = _notebook(tmp_path / "01_memory_wall.ipynb")
    for order in ((("alice",), ("mallory",)), (("mallory",), ("alice",))):
        grade = grade_notebook(
            nb,
            lesson="memory_wall",
            variants=variants.VariantPolicy(roster),
            identity=order,
            run=_answers(roster.seed("memory_wall", order[0][0])),
        )
        assert grade.score == 0 and grade.student == "", (grade.score, grade.student, grade.problems)
        assert any(p.startswith("refused: a group submission of") and "no variant" in p for p in grade.problems)
    # a group notebook carrying one member's issued seed is still graded once, for that member (either order)
    seed = roster.seed("memory_wall", "mallory")
    mine = _notebook(tmp_path / "m" / "01_memory_wall.ipynb", {"student": "mallory", "seed": seed})
    grade = grade_notebook(
        mine,
        lesson="memory_wall",
        variants=variants.VariantPolicy(roster),
        identity=(("alice",), ("mallory",)),
        run=_answers(seed),
    )
    assert (grade.score, grade.student) == (8.0, "mallory")


# ---- default/14-gradescope-results-sum ---------------------------------------------------------------------------


def test_a_gradescope_result_is_one_submission_and_never_above_the_maximum(tmp_path, monkeypatch):
    # default/14-gradescope-results-sum: the README's `distlab grade submissions/*.ipynb --lesson memory_wall
    # --gradescope results.json` on one upload set holding the same notebook three times ("01_memory_wall.ipynb",
    # "01_memory_wall (1).ipynb", "01_memory_wall-Copy1.ipynb") wrote "score": 24.0 with 24 tests: 3 x 8 of an
    # 8-point assignment. Several notebooks with --gradescope are now refused before grading; one is <= its maximum.
    from distlab.errors import ConfigurationError
    from distlab.grading.report import GradeReport, NotebookGrade, QuestionGrade

    names = ("01_memory_wall.ipynb", "01_memory_wall (1).ipynb", "01_memory_wall-Copy1.ipynb")
    paths = [str(_notebook(tmp_path / "submission" / n)) for n in names]
    monkeypatch.setattr(grade_module, "_run", _answers(None))
    results = tmp_path / "results.json"
    args = ["grade", *paths, "--lesson", "memory_wall", "--trusted", "--quiet", "--gradescope", str(results)]
    assert main(args) == 2 and not results.exists()
    assert main([*args[:2], *args[4:]]) == 0  # one notebook: its own 8 of 8
    assert json.loads(results.read_text())["score"] == 8.0
    # the report itself refuses to sum notebooks, and clamps a score to the questions' maximum (0 <= score <= 8)
    q = QuestionGrade("q1", "correct", 1.0, 1.0, "")
    with pytest.raises(ConfigurationError, match="one submission"):
        GradeReport(
            [NotebookGrade("a", "memory_wall", [q], []), NotebookGrade("b", "memory_wall", [q], [])]
        ).to_gradescope()
    over = GradeReport([NotebookGrade("a", "memory_wall", [QuestionGrade("q1", "correct", 3.0, 1.0, "")], [])])
    assert over.to_gradescope()["score"] == 1.0


# ---- default/16-filename-option-injection ------------------------------------------------------------------------


def _cli(folder: Path, line: str):
    """`line` run by bash in `folder` with distlab on PATH (the instructor's shell expands the glob)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_a_file_named_like_an_option_does_not_rewrite_the_command_line(tmp_path):
    # default/16-filename-option-injection: mallory uploads "--gradescope=bob.ipynb"; `distlab grade *.ipynb --lesson
    # memory_wall` in the flat folder expanded to "--gradescope=bob.ipynb alice.ipynb bob.ipynb ...", argparse took the
    # first as --gradescope, and results.json was written OVER bob.ipynb (his work gone). Now an option whose value
    # names a notebook, or an option given twice, is refused (rc 2, nothing written), and `--` keeps names as names.
    folder = tmp_path / "flat"
    folder.mkdir()
    for name in ("alice.ipynb", "bob.ipynb", "--gradescope=bob.ipynb", "--json=alice.ipynb"):
        (folder / name).write_text(f"the work of {name}")
    before = {p.name: p.read_text() for p in folder.iterdir()}
    done = _cli(folder, "distlab grade *.ipynb --lesson memory_wall --trusted --quiet")
    assert done.returncode == 2 and "names a notebook" in done.stderr, (done.returncode, done.stderr[-500:])
    done = _cli(folder, "distlab grade --lesson memory_wall --trusted --json out.json --json=x.json alice.ipynb")
    assert done.returncode == 2 and "given twice" in done.stderr, done.stderr[-500:]
    done = _cli(folder, "distlab grade --lesson memory_wall --trusted --quiet --json bob.ipynb -- alice.ipynb")
    assert done.returncode == 2, done.stderr[-500:]
    done = _cli(folder, "distlab grade --lesson memory_wall --trusted --quiet --js out.json -- alice.ipynb")
    assert done.returncode == 2, "an abbreviated option is no option"
    assert {p.name: p.read_text() for p in folder.iterdir()} == before  # nobody's file was written
    # an output that is one of the inputs is refused, with or without the .ipynb suffix
    (folder / "grades").write_text("not mine")
    done = _cli(folder, "distlab grade --lesson memory_wall --trusted --quiet --json grades -- grades")
    assert done.returncode == 2 and "one of the notebooks to grade" in done.stderr, done.stderr[-500:]
    # the README's form: `--` before the glob grades every file as a notebook, the odd names too
    done = _cli(folder, "distlab grade --lesson memory_wall --trusted --quiet --json out.json -- *.ipynb")
    assert done.returncode == 0, done.stderr[-500:]
    assert len(json.loads((folder / "out.json").read_text())["notebooks"]) == 4
    assert all((folder / n).read_text() == t for n, t in before.items())


# ---- class/03-journal-ignores-identity ---------------------------------------------------------------------------


def _export(folder: Path, roster, groups: dict[str, list[str]]) -> Path:
    """A Gradescope export: submission_N/01_memory_wall.ipynb carrying its first submitter's issued variant, and a
    submission_metadata.yml naming `groups` {folder: [submitter ids]}."""
    lines = []
    for name, people in groups.items():
        seed = roster.seed("memory_wall", people[0])
        _notebook(folder / name / "01_memory_wall.ipynb", {"student": people[0], "seed": seed})
        lines.append(f"{name}:\n  :submitters:\n")
        lines += [f"  - :name: {p}\n    :sid: {p}\n    :email: {p}@uni.example\n" for p in people]
    (folder / "submission_metadata.yml").write_text("".join(lines))
    return folder


def _right(raw, sources, questions, problems, **options):
    """A stand-in kernel: every answer right for the numbers the notebook is graded against."""
    return {f"answer_{name}": q.expected() for name, q in questions.items()}


def test_a_rerun_with_another_identity_grades_again(tmp_path, roster):
    # class/03-journal-ignores-identity: the journal skipped a notebook with the same bytes and policy, and neither
    # --export nor whose the notebook is were part of that. A: a first run without --export refused all six
    # students ("student 'submission_N' is not on the roster", 0/8); the right command with --export into the same
    # --out regraded nothing (all still 0/8). B: mallory added bob to her submission_6 as a group member (no new
    # bytes); the re-run kept "student mallory", no problem, bob nowhere. Both are graded again now.
    from distlab.grading import classroom

    export = _export(tmp_path / "export", roster, {"submission_1": ["alice"], "submission_2": ["mallory"]})
    out = tmp_path / "grades"
    options = dict(progress=False, lesson="memory_wall", variants=variants.VariantPolicy(roster), run=_right)

    def graded(report):  # the notebooks' rows (each roster student without a submission gets a row too)
        return [(g.student, g.score) for g in report.notebooks if "(no submission" not in g.path]

    first = classroom.grade_class([export], out, **options)  # A: without --export
    assert graded(first) == [("", 0.0), ("", 0.0)]
    again = classroom.grade_class([export], out, export=True, **options)
    assert graded(again) == [("alice", 8.0), ("mallory", 8.0)]
    _export(export, roster, {"submission_1": ["alice"], "submission_2": ["mallory", "bob"]})  # B: same bytes
    group = classroom.grade_class([export], out, export=True, **options)
    problems = group.notebooks[1].problems
    assert any("a group submission of mallory, bob" in p for p in problems), problems
    # nothing changed: the journal's records are kept (the stand-in kernel would be called again otherwise)
    calls = []
    classroom.grade_class([export], out, export=True, **{**options, "run": lambda *a, **k: calls.append(1) or {}})
    assert calls == []


# ---- class/10-student-without-row --------------------------------------------------------------------------------


def test_every_roster_student_and_every_student_folder_gets_a_row(tmp_path, roster):
    # class/10-student-without-row: mallory's folder held her notebook only as 01_memory_wall.IPYNB (the walk's
    # ".ipynb" test was case-sensitive), .01_memory_wall.ipynb and .ipynb_checkpoints/01_memory_wall.ipynb (hidden,
    # skipped), and an empty folder zed_empty_upload was given: rc 0, 5 rows for 7 folders, no row for mallory nor
    # zed, and the summary's class statistics silently left her out. Now .IPYNB is graded, an empty or hidden-only
    # folder gets a row saying what was seen, and a roster student with no submission at all (bob) gets a row.
    from distlab.grading import classroom

    submitted = tmp_path / "submitted"
    alice = _notebook(submitted / "alice" / "01_memory_wall.ipynb", {"student": "alice", "seed": "x"})
    mallory = submitted / "mallory"
    mallory.mkdir(parents=True)
    (mallory / "01_memory_wall.IPYNB").write_text(alice.read_text())
    (mallory / ".01_memory_wall.ipynb").write_text(alice.read_text())
    (mallory / ".ipynb_checkpoints").mkdir()
    (submitted / "zed_empty_upload").mkdir()
    hidden = submitted / "carol"  # not on this roster: a folder whose only notebook is hidden
    hidden.mkdir()
    (hidden / ".01_memory_wall.ipynb").write_text(alice.read_text())
    (hidden / "notes.txt").write_text("x")
    report = classroom.grade_class(
        [submitted],
        tmp_path / "g",
        progress=False,
        lesson="memory_wall",
        variants=variants.VariantPolicy(roster),
        run=_right,
    )
    rows = {g.path: g for g in report.notebooks}
    assert str(mallory / "01_memory_wall.IPYNB") in rows  # graded (refused: its seed is alice's, not hers)
    assert rows[str(mallory / "01_memory_wall.IPYNB")].student == "mallory"
    empty = next(g for p, g in rows.items() if "zed_empty_upload" in p)
    assert any("no notebook (.ipynb) found in this folder; seen: nothing" in p for p in empty.problems), empty
    carol = next(g for p, g in rows.items() if p.endswith("carol"))
    assert any("1 hidden file or folder, not searched, 1 other file" in p for p in carol.problems), carol
    bob = next(g for p, g in rows.items() if "bob" in p)  # on the roster, nothing submitted
    assert any("no notebook found for this roster student" in p for p in bob.problems), bob
    csv_text = (tmp_path / "g" / "results.csv").read_text()
    assert "(roster) bob" in csv_text and "zed_empty_upload" in csv_text and "mallory" in csv_text
    # alice, mallory (.IPYNB), zed, carol, bob: 5 rows, one per folder and roster student
    assert len(report.notebooks) == 5, sorted(rows)


# ---- class/02-release-date-bypass, class/08-copy-classmate-answers: what the docs promise ------------------------


def test_the_readme_states_what_variants_and_release_dates_do():
    # class/02-release-date-bypass: the README said "--release withholds qN.solution() until that date", but the
    # installed package gives any seed's answers (peek.py read q2 544.0 GB ... q8 12 of her 2099-released variant).
    # class/08-copy-classmate-answers: "answers cannot be copied", but only questions that declare variants differ
    # (lesson 1: q1, q5, q7 fixed; a classmate's answers scored 4.22/8 on average). The docs now say exactly that;
    # the facts they state are checked here against the lessons.
    from distlab import lessons as manifest
    from distlab.lessons.variants import personal

    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert "answers cannot be copied" not in readme
    fixed = [n for n, q in lesson_variant("memory_wall", None).items() if not getattr(q, "variants", None)]
    assert fixed == ["q1", "q5", "q7"] and "in lesson 1 q1, q5 and q7" in readme
    without = sorted(
        manifest.LESSONS[s].exercise.split("_")[0]
        for s in manifest.graded()
        if not any(getattr(q, "variants", None) for q in lesson_variant(s, None).values())
    )
    assert without == ["11", "11b"] and "in every graded lesson except lessons 11 and 11b" in readme
    # "The answer key is not secret from the student": a variant released in 2099 is withheld in the notebook's
    # rebound question, and the package computes the same expected answer for the seed (as peek.py did)
    seed = "0123456789abcdef"
    q2 = personal("memory_wall", "q2", seed=seed, release="2099-01-01")  # one name: the question itself
    assert "released on 2099-01-01" in str(q2.solution())
    assert lesson_variant("memory_wall", seed)["q2"].expected() is not None
    assert "not access control" in readme and "by the student's own clock" in readme


def test_a_refused_group_row_does_not_flag_the_first_one_named(tmp_path):
    # class/07-group-ids-conflict-not-checked: mallory (sid "bob") + erin, refused -- but results.csv still flagged
    # bob's honest 8/8 row "the same student also submitted export/submission_6/..." (the refused row was counted as
    # the first id named, "bob"). A refused or group row graded for nobody is nobody's.
    from distlab.grading.class_results import shared_students

    def record(key, student, identity, problems):
        grade = {"student": student, "lesson": "memory_wall", "problems": problems}
        return {"key": key, "identity": identity, "grade": grade}

    bob = record("s2", "bob", ["bob", "bob@u.edu"], [])
    why = "refused: the submitter's ids ('bob', 'mallory@u.edu') name 2 different students of the roster; ..."
    group = record("s6", "", [["bob", "mallory@u.edu"], ["erin"]], [why.replace("the submitter's", "one's")])
    single = record("s7", "", ["bob", "mallory@u.edu"], [why])
    assert shared_students([bob, group, single]) == {}
    # two notebooks really graded for bob are still flagged
    assert set(shared_students([bob, record("s8", "bob", ["bob"], [])])) == {"s2", "s8"}


# ---- container/07-group-no-variant-first-named, through the generated autograder ----------------------------------

from class_helpers import ROOT, needs_unprivileged_python, solve  # noqa: E402
from test_container_mode import _run, autograder  # noqa: E402,F401 (the fake /autograder fixture)


@needs_unprivileged_python
def test_the_autograder_refuses_a_group_notebook_without_a_variant(autograder):  # noqa: F811
    # container/07-group-no-variant-first-named: submission_metadata.json users [alice, bob] (the submitter picks the
    # group), the upload the public exercise answered with alice's numbers: results.json said "a group submission of
    # alice, ...: graded once, for 'alice' (the notebook carries no variant)" and the test names showed alice's
    # numbers to the submitter. Now refused: 0 points, nobody's numbers.
    root, roster = autograder
    (root / "submission_metadata.json").write_text(
        json.dumps(
            {"users": [{"sid": "alice", "email": "alice@uni.example"}, {"sid": "bob", "email": "bob@uni.example"}]}
        )
    )
    upload = root / "submission" / "01_memory_wall.ipynb"
    upload.write_text((ROOT / "exercises" / "01_memory_wall.ipynb").read_text())
    solve(upload, "memory_wall", roster.seed("memory_wall", "alice"))
    results, log = _run(root)
    assert results["score"] == 0, results
    assert "refused: a group submission of alice, bob whose notebook carries no variant" in results["output"], results


def test_the_autograder_builder_takes_the_secret_from_the_environment_too(tmp_path, monkeypatch):
    # default/04-env-secret-ignored ("the documented ways must all work"): `distlab gradescope-autograder --roster
    # roster.csv` with the key in $DISTLAB_VARIANT_SECRET refused ("need both --roster and --secret-file"); it now
    # packs the environment's secret, byte for byte what --secret-file packs.
    import zipfile

    roster_csv, secret = write_roster(tmp_path, IDS)
    monkeypatch.setenv(variants.SECRET_ENV, SECRET.decode())
    out = tmp_path / "autograder.zip"
    args = ["gradescope-autograder", "--lesson", "memory_wall", "--out", str(out), "--roster", str(roster_csv)]
    assert main(args) == 0
    with zipfile.ZipFile(out) as zf:
        assert zf.read("variant_secret") == SECRET


# ---- redteam3 container/06-file-name-forged-score-line -----------------------------------------------------------


def test_a_file_name_cannot_read_as_the_score_line_of_the_gradescope_output():
    # redteam3/container/06-file-name-forged-score-line: the upload's only notebook was named "01 memory_wall: 8∕8
    # (lesson memory_wall) - regraded by instructor, see note.ipynb" (U+2215, printable); results.json's "output",
    # shown to the student and the graders, began with that name: "01 memory_wall: 8∕8 (lesson memory_wall) -
    # regraded ...: 0/8". The grader's own "score: 0/8" now comes first and the name after it, quoted, with every
    # non-ASCII character escaped (round 8: through report.quoted, double quotes, the escape's backslash doubled).
    from distlab.grading.report import GradeReport, NotebookGrade, QuestionGrade

    name = "01 memory_wall: 8\u22158 (lesson memory_wall) - regraded by instructor, see note.ipynb"
    q = QuestionGrade("q1", "incorrect", 0.0, 1.0, "not yet")
    output = GradeReport([NotebookGrade(f"/autograder/submission/{name}", "memory_wall", [q], [])]).to_gradescope()
    first = output["output"].splitlines()[0]
    assert first.startswith('score: 0/1 (lesson memory_wall); notebook graded: "01 memory_wall: 8\\\\u22158'), first
    assert "\u2215" not in output["output"] and all(not t["name"].startswith("01 ") for t in output["tests"])
