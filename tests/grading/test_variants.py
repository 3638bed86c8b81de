"""Per-student variants (issue 15): seeds per student, numbers per seed, forged seeds refused, release dates."""

from __future__ import annotations

import datetime
import json
import shutil

import pytest

from class_helpers import ROOT, SECRET, solve, write_roster
from distlab.errors import ConfigurationError
from distlab.grading import variants
from distlab.grading.grade import grade_notebook
from distlab.lessons import memory_wall, pipeline
from distlab.lessons.questions import with_params
from distlab.lessons.variants import Withheld, draw, lesson_variant, personal, variant

SEEDS = [f"seed-{i}" for i in range(40)]


def test_a_seed_always_draws_the_same_numbers_from_the_declared_choices():
    for q in (memory_wall.q2, memory_wall.q3, memory_wall.q6, pipeline.q1, pipeline.q2):
        for seed in SEEDS[:10]:
            picked = draw(q, "lesson", seed)
            assert picked == draw(q, "lesson", seed)
            assert set(picked) == set(q.variants)
            assert all(picked[p] in q.variants[p] for p in picked)


def test_questions_that_share_a_setup_share_the_drawn_numbers():
    for seed in SEEDS[:12]:
        qs = lesson_variant("collectives", seed)
        assert qs["q1"].params == qs["q2"].params and qs["q3"].params == qs["q6"].params  # "the same" all-reduce
        assert qs["q6"].prompt.startswith(f"The {qs['q3'].params['gb']:g} GB all-reduce over {qs['q3'].params['n']}")


def test_students_get_different_numbers():
    prompts = {lesson_variant("memory_wall", s)["q3"].prompt for s in SEEDS}
    assert len(prompts) >= 10  # 4 x 5 choices: 40 seeds land on many of them
    roster = variants.Roster({s: {"id": s} for s in ("alice", "bob")}, SECRET)
    a, b = (lesson_variant("memory_wall", roster.seed("memory_wall", s)) for s in ("alice", "bob"))
    assert [q.prompt for q in a.values()] != [q.prompt for q in b.values()]


def test_the_expected_answers_follow_the_seed():
    for seed in SEEDS[:12]:
        q = lesson_variant("memory_wall", seed)["q3"]
        billions, dp = q.params["billions"], q.params["dp"]
        assert f"{dp} GPUs, {billions:g}B model" in q.prompt
        assert q.expected() == pytest.approx(billions * 16)  # plain DP: every GPU holds all 16 B/parameter
        assert q.check(q.expected()).correct
        assert f"{dp} GPUs" in q.solution().text
        q1 = lesson_variant("pipeline", seed)["q1"]
        p, m = q1.params["p"], q1.params["m"]
        assert q1.expected() == pytest.approx(100 * (p - 1) / (m + p - 1))


def test_without_a_seed_the_lesson_is_as_written():
    assert variant(memory_wall.q3, "memory_wall", None) is memory_wall.q3
    assert lesson_variant("memory_wall", None)["q3"] is memory_wall.q3
    assert memory_wall.q3.prompt.startswith("Plain data parallelism over 64 GPUs, 30B model")
    # a question without variants is the same question for every seed
    assert variant(memory_wall.q1, "memory_wall", "x") is memory_wall.q1


def test_with_params_rebinds_prompt_hint_and_checks():
    q = with_params(memory_wall.q3, dp=8)
    assert "over 8 GPUs" in q.prompt and q.params == {"billions": 30, "dp": 8}
    assert memory_wall.q3.params == {"billions": 30, "dp": 64}  # the original is unchanged
    with pytest.raises(KeyError):
        with_params(memory_wall.q3, gpus=8)


def test_the_seed_is_an_hmac_of_the_secret():
    roster = variants.Roster({"alice": {"id": "alice"}}, SECRET)
    other = variants.Roster({"alice": {"id": "alice"}}, b"another secret")
    assert roster.seed("memory_wall", "alice") != other.seed("memory_wall", "alice")
    assert roster.seed("data_parallel", "alice") == roster.seed("data_parallel_zero", "alice")  # older name
    with pytest.raises(ConfigurationError):
        variants.Roster({}, b"")


def test_the_release_date_withholds_the_solution():
    future, past = "2999-01-01", "2000-01-01"
    q2, q3 = personal("memory_wall", "q2 q3", seed="s", release=future)
    assert isinstance(q2, Withheld)
    text = q2.solution().text
    assert "released on 2999-01-01" in text and "GB" not in text.split(";")[0]
    with pytest.raises(AttributeError, match="withheld"):
        q2.expected()
    assert q2.check(lesson_variant("memory_wall", "s")["q2"].expected()).correct  # checking still works
    assert q3.hint().text == memory_wall.q3.hint_text
    released = personal("memory_wall", "q2", seed="s", release=past)
    assert released.solution().text == lesson_variant("memory_wall", "s")["q2"].solution().text
    assert Withheld(q3, "2026-12-01T12:00").released(datetime.datetime(2026, 12, 1, 12, tzinfo=datetime.timezone.utc))


def test_the_roster_reads_ids_and_emails(tmp_path):
    roster_csv, secret = write_roster(tmp_path)
    roster = variants.load_roster(roster_csv, variants.read_secret(secret))
    assert sorted(roster.students) == ["alice", "bob", "carol"]
    assert roster.find("BOB@uni.example") == "bob" and roster.find("mallory") is None
    odd = variants.Roster({"Ann Lee/2": {"id": "Ann Lee/2"}}, SECRET)
    assert odd.find(variants.folder_name("Ann Lee/2")) == "Ann Lee/2"  # the folder build_variants wrote
    (tmp_path / "bad.csv").write_text("name\nx\n")
    with pytest.raises(ConfigurationError, match="id column"):
        variants.load_roster(tmp_path / "bad.csv", SECRET)


@pytest.fixture
def class_notebooks(tmp_path):
    roster_csv, secret = write_roster(tmp_path)
    roster = variants.load_roster(roster_csv, variants.read_secret(secret))
    written = variants.build_variants(
        roster, ROOT / "exercises", tmp_path / "out", ["memory_wall"], release="2999-01-01"
    )
    return roster, {p.parent.name: p for p in written}


def test_one_notebook_per_student_with_the_students_numbers(class_notebooks):
    roster, paths = class_notebooks
    assert sorted(paths) == ["alice", "bob", "carol"]
    for sid, path in paths.items():
        nb = json.loads(path.read_text())
        meta = nb["metadata"]["distlab"]
        assert meta["lesson"] == "memory_wall"
        assert meta["variant"]["seed"] == roster.seed("memory_wall", sid)
        assert meta["variant"]["release"].startswith("2999-01-01")
        text = "".join("".join(c["source"]) for c in nb["cells"])
        mine = lesson_variant("memory_wall", meta["variant"]["seed"])
        assert f"**Q3.** {mine['q3'].prompt}" in text  # the prompt shows this student's numbers
        assert f"personal('memory_wall', 'q1 q2 q3 q4 q5 q6 q7 q8', seed={meta['variant']['seed']!r}" in text


def test_the_personalised_notebook_checks_with_the_students_numbers(class_notebooks, execute_notebook, tmp_path):
    import nbformat

    roster, paths = class_notebooks
    seed = roster.seed("memory_wall", "alice")
    nb = nbformat.read(solve(paths["alice"], "memory_wall", seed), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("q2.solution()"))  # the student asks for a worked answer
    execute_notebook(nb, tmp_path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    texts = [o.get("data", {}).get("text/plain", "") for o in outputs]
    assert sum("correct" in t and "not yet" not in t for t in texts) == 8
    assert any("released on 2999-01-01" in t for t in texts)  # the appended q2.solution() is withheld


def _policy(tmp_path):
    roster_csv, secret = write_roster(tmp_path)
    return variants.VariantPolicy(variants.load_roster(roster_csv, variants.read_secret(secret)))


def test_a_forged_seed_is_refused(class_notebooks, tmp_path):
    roster, paths = class_notebooks
    forged = paths["alice"]
    nb = json.loads(forged.read_text())
    nb["metadata"]["distlab"]["variant"]["seed"] = "0000000000000000"  # an easy seed, picked by the student
    forged.write_text(json.dumps(nb))
    grade = grade_notebook(forged, lesson="memory_wall", variants=_policy(tmp_path), identity="alice", sandbox="audit")
    assert grade.score == 0 and any(p.startswith("refused") and "seed" in p for p in grade.problems)
    assert all(q.status == "not attempted" for q in grade.questions)


def test_a_copied_notebook_is_refused_for_the_student_who_submits_it(class_notebooks, tmp_path):
    roster, paths = class_notebooks
    solve(paths["alice"], "memory_wall", roster.seed("memory_wall", "alice"))
    grade = grade_notebook(
        paths["alice"], lesson="memory_wall", variants=_policy(tmp_path), identity="bob", sandbox="audit"
    )
    assert grade.score == 0 and any("not the one issued to student 'bob'" in p for p in grade.problems)
    stranger = grade_notebook(
        paths["alice"], lesson="memory_wall", variants=_policy(tmp_path), identity="mallory", sandbox="audit"
    )
    assert stranger.score == 0 and any("not on the roster" in p for p in stranger.problems)


def test_the_issued_seed_grades_full_marks_and_other_numbers_fail(class_notebooks, tmp_path):
    roster, paths = class_notebooks
    alice = solve(paths["alice"], "memory_wall", roster.seed("memory_wall", "alice"))
    grade = grade_notebook(alice, lesson="memory_wall", variants=_policy(tmp_path), identity="alice", sandbox="audit")
    assert (grade.score, grade.max_score, grade.student) == (8.0, 8.0, "alice")
    # the cell that rebinds the questions to her numbers runs in the sandboxed kernel without a problem
    # (distlab.lessons.variants is imported before the sandbox hides the lessons' sources)
    assert grade.problems == [], grade.problems
    # bob answers with the textbook numbers (the self-study lesson's), not his own: the varied questions fail
    bob = solve(paths["bob"], "memory_wall", None)
    grade = grade_notebook(bob, lesson="memory_wall", variants=_policy(tmp_path), identity="bob", sandbox="audit")
    mine = lesson_variant("memory_wall", roster.seed("memory_wall", "bob"))
    differs = {n for n, q in mine.items() if q.expected() != getattr(memory_wall, n).expected()}
    assert differs and {q.question for q in grade.questions if q.status != "correct"} == differs


def test_self_study_notebooks_grade_as_before(tmp_path):
    path = tmp_path / "01_memory_wall.ipynb"
    shutil.copy(ROOT / "exercises" / "01_memory_wall.ipynb", path)
    solve(path, "memory_wall", None)
    grade = grade_notebook(path, sandbox="audit")
    assert (grade.score, grade.student) == (8.0, "") and grade.problems == []
    assert "student" not in grade.to_dict()


def test_the_cli_builds_variants(tmp_path, capsys, monkeypatch):
    from distlab.cli import main

    roster_csv, _ = write_roster(tmp_path, ids=("s1", "s2"))
    monkeypatch.setenv(variants.SECRET_ENV, SECRET.decode())
    assert (
        main(
            [
                "exercises",
                "--variants",
                str(roster_csv),
                "--exercises",
                str(ROOT / "exercises"),
                "--out",
                str(tmp_path / "v"),
                "--lesson",
                "pipeline",
            ]
        )
        == 0
    )
    assert sorted(p.parent.name for p in (tmp_path / "v").rglob("*.ipynb")) == ["s1", "s2"]
    assert (
        main(
            [
                "exercises",
                "--variants",
                str(roster_csv),
                "--exercises",
                str(ROOT / "exercises"),
                "--out",
                str(tmp_path / "v"),
                "--release",
                "next week",
            ]
        )
        == 2
    )
    assert "not an ISO date" in capsys.readouterr().err


def test_a_submitter_whose_sid_and_email_name_two_students_is_refused_and_flagged(class_notebooks, tmp_path):
    # the attack (red team 12): submission_metadata.json's user had sid "alice" and e-mail mallory's own; Roster.find
    # took the first id on the roster, so mallory was silently graded against alice's numbers (a classmate's
    # worked answers would score). Two ids naming two roster students are now refused and said so
    roster, paths = class_notebooks
    solve(paths["alice"], "memory_wall", roster.seed("memory_wall", "alice"))
    metadata = tmp_path / "submission_metadata.json"
    metadata.write_text(json.dumps({"users": [{"email": "bob@uni.example", "name": "Bob", "sid": "alice"}]}))
    grade = grade_notebook(
        paths["alice"],
        lesson="memory_wall",
        variants=_policy(tmp_path),
        identity=variants.submitter(metadata),
        sandbox="audit",
    )
    assert grade.score == 0 and grade.student == ""
    assert any("'alice', 'bob@uni.example'" in p and "2 different students" in p for p in grade.problems)
    # ids that all name one student (her id and her e-mail) are hers, as before
    metadata.write_text(json.dumps({"users": [{"email": "alice@uni.example", "sid": "alice"}]}))
    same = grade_notebook(
        paths["alice"],
        lesson="memory_wall",
        variants=_policy(tmp_path),
        identity=variants.submitter(metadata),
        sandbox="audit",
    )
    assert (same.score, same.student) == (8.0, "alice")


def test_with_the_secret_a_notebook_without_a_variant_is_refused_not_graded_with_the_default_numbers(
    class_notebooks, tmp_path
):
    # 03-variant-stripped-public-solution: graded with --secret-file (variants in use) but no --roster, the public
    # solution notebook (no variant block: the default numbers, public answers) scored 8/8 without a word, and the
    # secret was silently ignored. Now it is refused; a genuine variant is checked against the seed it names.
    from distlab.cli import main

    roster, paths = class_notebooks
    _, secret = write_roster(tmp_path)
    public = tmp_path / "public" / "01_memory_wall.ipynb"
    public.parent.mkdir()
    shutil.copy(ROOT / "solutions" / "01_memory_wall.ipynb", public)
    out = tmp_path / "public.json"
    args = ["grade", str(public), "--lesson", "memory_wall", "--secret-file", str(secret), "--trusted"]
    assert main([*args, "--json", str(out)]) == 0
    found = json.loads(out.read_text())
    assert found["score"] == 0 and any("refused" in p for n in found["notebooks"] for p in n["problems"]), found
    # alice's own variant, solved with her numbers: graded with them, the check named in the report
    solve(paths["alice"], "memory_wall", roster.seed("memory_wall", "alice"))
    args[1] = str(paths["alice"])
    assert main([*args, "--json", str(out)]) == 0
    found = json.loads(out.read_text())
    assert found["score"] == 8, found
    # the same notebook with its seed changed to an easy one is refused
    nb = json.loads(paths["alice"].read_text())
    nb["metadata"]["distlab"]["variant"]["seed"] = "0000000000000000"
    paths["alice"].write_text(json.dumps(nb))
    assert main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["score"] == 0
