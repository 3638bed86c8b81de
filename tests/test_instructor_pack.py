"""The instructor pack (issue 18): one command builds it offline from the repository, every lesson of the manifest is
on every page and as slides, every cheat-sheet formula names an existing distlab function, and the bibliography
covers every citation the scan finds."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from distlab import cli, instructor_pack
from distlab import lessons as manifest
from distlab.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted(manifest.LESSONS.values(), key=lambda l: (l.number, l.part))


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """The whole pack, built with every network connection refused (the build must need none)."""
    out = tmp_path_factory.mktemp("instructor")
    real_connect = socket.socket.connect

    def refuse(self, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"network access during the build: {address}")
        return real_connect(self, address)

    socket.socket.connect = refuse
    try:
        written = instructor_pack.build(out, repo=ROOT)
    finally:
        socket.socket.connect = real_connect
    return out, written


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_every_page_is_written_in_markdown_and_html(pack):
    out, written = pack
    for page in (*instructor_pack.PAGES, "index"):
        assert (out / f"{page}.md").is_file() and (out / f"{page}.html").is_file(), page
        html = _text(out / f"{page}.html")
        assert html.startswith("<!DOCTYPE html>") and "</html>" in html
    assert "{{" not in _text(out / "misconceptions.md")  # every {{slug.qN}} number was filled in


def test_every_lesson_is_on_the_syllabus_and_the_misconception_page(pack):
    out, _ = pack
    syllabus, misconceptions = _text(out / "syllabus.md"), _text(out / "misconceptions.md")
    for lesson in LESSONS:
        assert re.search(rf"^### Lesson {lesson.label}: ", syllabus, re.M), lesson.slug
        assert re.search(rf"^\| {lesson.label} \| ", syllabus, re.M), lesson.slug
        assert f"Lesson {lesson.label}" in misconceptions, lesson.slug
    for lesson in LESSONS:
        if lesson.number <= 9:  # lessons 1-9 have a written list, not the placeholder
            assert re.search(rf"^## Lesson {lesson.label}\s*$", misconceptions, re.M), lesson.slug


def test_each_lesson_has_objectives_and_a_time_from_its_notebook(pack):
    syllabus = instructor_pack.sources._read_toml(ROOT / "instructor" / "syllabus.toml")
    for lesson in LESSONS:
        s = instructor_pack.summarise(ROOT, lesson, syllabus)
        if not (ROOT / lesson.notebook).is_file():
            continue
        assert s.present and s.sections and s.objectives and "(no objectives" not in s.objectives
        # the estimate is the stated rates applied to the notebook: at least the graded questions' 6 minutes each
        assert s.minutes >= 6 * s.questions and s.minutes % 5 == 0


def test_lesson_1_objectives_are_the_notebooks_own_words(pack):
    out, _ = pack
    assert (
        "You can compute, for any model, how many bytes training keeps per GPU, where they go, and when a GPU runs out."
    ) in _text(out / "syllabus.md")


def test_a_lesson_declared_in_the_manifest_without_a_notebook_appears_as_a_placeholder(tmp_path, monkeypatch):
    extra = manifest.Lesson(99, "future_lesson", "notebooks/99_future_lesson.ipynb")
    monkeypatch.setitem(manifest.LESSONS, "future_lesson", extra)
    monkeypatch.setitem(manifest.NAMES, "future_lesson", "future_lesson")
    instructor_pack.build(tmp_path, repo=ROOT, slides=False)
    syllabus, index = _text(tmp_path / "syllabus.md"), _text(tmp_path / "index.md")
    assert "### Lesson 99: future lesson" in syllabus and "not in the repository yet" in syllabus
    assert "| 99 | future lesson | not written yet |" in syllabus
    assert "Lesson 99 (future_lesson): not written yet" in _text(tmp_path / "misconceptions.md")
    assert "Lesson 99: no notebook yet" in index


def test_every_lesson_notebook_is_a_slideshow(pack):
    out, _ = pack
    for lesson in LESSONS:
        if not (ROOT / lesson.notebook).is_file():
            continue
        path = out / "slides" / (Path(lesson.notebook).stem + ".slides.html")
        html = _text(path)
        assert "reveal" in html and html.count("<section") >= 5, path.name  # one per heading, at least
        title = instructor_pack.summarise(ROOT, lesson, {}).title
        assert title.split(":")[0].replace("&", "&amp;") in html, path.name
        assert f"slides/{path.name}" in _text(out / "index.md")


def test_slide_types_follow_the_headings():
    import nbformat

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Title"),
            nbformat.v4.new_markdown_cell("text"),
            nbformat.v4.new_markdown_cell("### Sub"),
            nbformat.v4.new_code_cell("1 + 1"),
            nbformat.v4.new_markdown_cell("## Section"),
        ]
    )
    kinds = [c.metadata["slideshow"]["slide_type"] for c in instructor_pack.slide_notebook(nb).cells]
    assert kinds == ["slide", "-", "subslide", "subslide", "slide"]
    assert "slideshow" not in nb.cells[0].metadata  # the lesson notebook itself is not changed


def test_every_cheat_sheet_formula_names_an_existing_distlab_function(pack):
    out, _ = pack
    sheet = _text(out / "cheatsheet.md")
    keys = {w["key"] for w in instructor_pack.bibliography(ROOT)}
    assert len(instructor_pack.CHEAT_SHEET) >= 15
    for formula in instructor_pack.CHEAT_SHEET:
        module, _, name = formula.function.rpartition(".")
        assert module.startswith("distlab.")
        assert callable(getattr(__import__(module, fromlist=[name]), name)), formula.function
        assert f"`{formula.function}`" in sheet and formula.units and formula.source in keys
        assert formula.example() in sheet


def test_cheat_sheet_examples_are_the_derived_numbers(pack):
    out, _ = pack
    sheet = _text(out / "cheatsheet.md")
    assert "7B params: 14 GB + 14 GB + 84 GB = 112 GB" in sheet  # 7e9 x (2, 2, 12) bytes
    assert "14 GB over 8 GPUs at 450 GB/s, alpha 0: 54.4 ms" in sheet  # 2 x 7/8 x 14e9 / 450e9 = 54.44 ms
    assert "idle share 27.3%, time added 37.5%" in sheet  # 3/11 and 3/8
    assert "4 equal buckets: 100.0 ms exposed" in sheet  # max(62.5, 250 - 3/4 x 200) = 100 ms


def test_an_unknown_function_on_the_cheat_sheet_is_our_error():
    with pytest.raises(ConfigurationError, match="not a distlab function"):
        instructor_pack.cheat_sheet._fn("distlab.memory.no_such_formula")


def test_the_bibliography_covers_every_citation_the_scan_finds(pack):
    out, _ = pack
    scanned = instructor_pack.scan_citations(ROOT)
    # the scan finds the kit's main sources (so an empty scan cannot pass)
    for known in ("Rajbhandari et al. 2020", "Narayanan et al. 2021", "Korthikanti et al. 2022", "Huang et al. 2019"):
        assert known in scanned, known
    assert instructor_pack.uncovered_citations(ROOT) == {}
    page = _text(out / "bibliography.md")
    assert "Cited but not yet" not in page
    for work in instructor_pack.bibliography(ROOT):
        assert work["reference"] in page


def test_the_scan_reports_a_new_citation(tmp_path):
    (tmp_path / "distlab").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "distlab" / "x.py").write_text('"""A formula (Doe et al. 2031, Table 2); In 2024 nothing."""\n')
    assert instructor_pack.scan_citations(tmp_path) == {"Doe et al. 2031": {"distlab/x.py"}}


def test_the_guide_names_only_commands_that_exist(pack):
    out, _ = pack
    parser = cli.build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    # commands as the guide writes them: in a code span or on a command line of their own
    named = set(re.findall(r"(?:`|^\s*)(?:python -m )?distlab ([a-z][a-z-]+)", _text(out / "guide.md"), re.M))
    assert named and named <= commands, named - commands
    assert "instructor-pack" in commands


def test_the_command_line_builds_and_reports_our_errors(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "distlab", "instructor-pack", *args], capture_output=True, text=True, cwd=ROOT
        )

    proc = run("--help")
    assert proc.returncode == 0 and "--out" in proc.stdout and "--hide-code" in proc.stdout
    proc = run("--out", str(tmp_path / "pack"), "--no-slides")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pack" / "cheatsheet.html").is_file() and not (tmp_path / "pack" / "slides").exists()
    (tmp_path / "afile").write_text("x")
    proc = run("--out", str(tmp_path / "afile"))
    assert proc.returncode == 2 and "distlab: error: --out" in proc.stderr and "Traceback" not in proc.stderr
    proc = run("--repo", str(tmp_path), "--out", str(tmp_path / "p2"))
    assert proc.returncode == 2 and "not a distlab repository" in proc.stderr


def test_every_lesson_after_the_first_says_what_it_builds_on():
    # issue 31: lessons 10 and 11 read "builds on: -" (instructor/syllabus.toml had no entry for them)
    syllabus = instructor_pack.sources._read_toml(ROOT / "instructor" / "syllabus.toml")
    missing = [
        lesson.label
        for lesson in LESSONS
        if lesson.number > 1 and not syllabus.get("lessons", {}).get(lesson.slug, {}).get("builds_on")
    ]
    assert not missing, f"lessons without builds_on: {missing}"


def test_the_glossary_and_the_cheat_sheet_cover_every_graded_lesson():
    # issue 31: neither had a lesson 10 or 11 term; every lesson with graded questions has at least one of each
    glossary = _text(ROOT / "instructor" / "glossary.md")
    sheet_lessons = {row.lesson.split(" §")[0] for row in instructor_pack.CHEAT_SHEET}
    for lesson in LESSONS:
        if not lesson.questions or lesson.slug == "capstone":  # the capstone introduces no new term
            continue
        assert re.search(rf"Lesson {lesson.label}\b", glossary), f"no glossary term of lesson {lesson.label}"
        if lesson.number in (10, 11):
            assert f"Lesson {lesson.label}" in sheet_lessons, f"no cheat-sheet formula of lesson {lesson.label}"


def test_the_lesson_11_misconceptions_name_the_mtbf_and_the_critical_batch_rightly():
    # 4.82 min is Young's checkpoint interval (11b q3), not how often the job fails (its MTBF, 23.2 min); 1.48 is the
    # step factor of doubling the batch (11b q4), not the critical batch (7.37 M tokens at 2 nats)
    from distlab import batch, failures
    from distlab.lessons import long_runs as l11b

    text = _text(ROOT / "instructor" / "misconceptions.md")
    mtbf_min = failures.job_mtbf(131072, failures.failure_rate_per_gpu_hour()) / 60
    assert f"every {mtbf_min:.1f} minutes" in text and "fails every\n  {{long_runs.q3}}" not in text
    assert f"{batch.critical_batch_tokens(2.0) / 1e6:.2f} M tokens" in text
    assert "{{long_runs.q4}} M tokens" not in text
    assert l11b.q3.expected() < mtbf_min  # the interval is shorter than the time between failures


def test_instructor_pack_without_nbconvert_is_our_error(monkeypatch, capsys, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nbconvert" else real(name, *a))
    assert cli.main(["instructor-pack", "--out", str(tmp_path / "pack"), "--no-slides"]) == 2
    err = capsys.readouterr().err
    assert "nbconvert" in err and "distlab[instructor]" in err and "Traceback" not in err
