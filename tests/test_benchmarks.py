"""The benchmark runner: --help runs nothing, and a figure is printed beside the one recorded in RESULTS.md, with the
machine's load, saying REGRESSION when it is slower than recorded by more than the noise allowed."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def timing(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("_timing")


def test_help_prints_help_and_runs_nothing():
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.startswith("usage: benchmarks/run.py")
    # every benchmark is listed with its summary, and none ran: no "== name" header, no figure
    for path in BENCHMARKS.glob("bench_*.py"):
        assert path.stem.removeprefix("bench_") in proc.stdout
    assert not any(line.startswith("== ") for line in proc.stdout.splitlines()) and " ms   p95 " not in proc.stdout
    assert time.perf_counter() - started < 30  # the planner benchmark alone takes longer than a plain start


def test_an_unknown_name_is_refused_with_the_known_ones():
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "plannr"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 2 and "unknown benchmark plannr" in proc.stderr and "planner" in proc.stderr
    assert proc.stdout == ""


def test_a_figure_is_compared_with_its_record_and_the_load_is_named(timing, tmp_path, monkeypatch):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nprose | with | a | pipe | or | two\n")
    # a row of the table as written before the reference time existed (six columns): read, and judged raw
    results.write_text(
        results.read_text()
        + "\n## Recorded figures (what each benchmark compares itself with)\n\n<!-- recorded figures: begin -->\n| benchmark | figure | unit | date | commit | load |\n|---|---|---|---|---|---|\n"
        + "| `planner, 52956 configurations` | 60 | ms median | 2026-11-28 | abc1234 | 0.40 |\n<!-- recorded figures: end -->\n"
    )
    timing.record(
        {"import distlab": (2.0, "ms median")}, "2026-11-29", "def5678", 1.5, results=results, reference_ms=40.0
    )
    figures = timing.recorded(results)
    assert figures["planner, 52956 configurations"] == {
        "value": 60.0,
        "unit": "ms median",
        "date": "2026-11-28",
        "commit": "abc1234",
        "load": "0.40",
        "reference": None,
    }
    assert figures["import distlab"]["reference"] == 40.0
    assert set(figures) == {"planner, 52956 configurations", "import distlab"}  # the prose row is not a figure
    monkeypatch.setattr(timing, "load", lambda: 3.25)
    # 72 / 60 = 1.2: 20% slower, past the 15% allowed
    said = timing.against_record("planner, 52956 configurations", 72.0, "ms median", figures)
    assert said.startswith("  REGRESSION: 20% slower than recorded")
    assert "load 0.40; load now 3.25" in said and "abc1234" in said and "no reference time recorded" in said
    # 66 / 60 = 1.1: slower, within the noise; 45 / 60 = 0.75: 25% faster
    assert "10% slower than recorded, within 15%" in timing.against_record(
        "planner, 52956 configurations", 66.0, "ms median", figures
    )
    assert "25% faster than recorded" in timing.against_record(
        "planner, 52956 configurations", 45.0, "ms median", figures
    )
    # nothing recorded under that name, or in another unit: nothing to compare
    assert timing.against_record("planner, 1 configuration", 45.0, "ms median", figures) == ""
    assert timing.against_record("import distlab", 2.0, "MiB", figures) == ""
    # recording again replaces the row of that name and keeps the rest
    timing.record(
        {"import distlab": (2.5, "ms median")}, "2026-11-30", "0123abc", 0.2, results=results, reference_ms=41.0
    )
    again = timing.recorded(results)
    assert again["import distlab"]["value"] == 2.5 and again["import distlab"]["reference"] == 41.0
    assert again["planner, 52956 configurations"]["value"] == 60.0  # the old row kept, with no reference
    assert again["planner, 52956 configurations"]["reference"] is None
    assert results.read_text().count("## Recorded figures") == 1


def test_the_report_line_carries_the_comparison(timing, monkeypatch):
    monkeypatch.setattr(
        timing,
        "recorded",
        lambda results=None: {
            "x": {"value": 10.0, "unit": "ms median", "date": "d", "commit": "c", "load": "0.10", "reference": None}
        },
    )
    line = timing.report("x", {"n": 3, "median_ms": 13.0, "p95_ms": 14.0, "min_ms": 12.0})
    assert "REGRESSION: 30% slower than recorded" in line and "load now" in line


def test_a_figure_is_judged_for_the_machines_speed_by_the_reference_time(timing, tmp_path, monkeypatch):
    """Recorded at 60 ms with the reference work taking 40 ms; now the reference takes 60 ms (the machine 50% slower):
    a figure is scaled by 40 / 60 before the 15% rule. By hand: 96 ms -> 64 ms, 7% slower (raw 60%); 108 ms -> 72 ms,
    20% slower: REGRESSION (raw 80%); 84 ms -> 56 ms, 7% faster (raw 40% slower)."""
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n")
    timing.record({"planner": (60.0, "ms median")}, "2026-12-01", "abc1234", 0.3, results=results, reference_ms=40.0)
    figures = timing.recorded(results)
    monkeypatch.setattr(timing, "machine_reference_ms", lambda: 60.0)
    monkeypatch.setattr(timing, "load", lambda: 0.5)
    within = timing.against_record("planner", 96.0, "ms median", figures)
    assert within.startswith("  7% slower than recorded, for this machine's speed, within 15%")
    assert "the machine runs the reference work 50% slower than then (60.0 ms against 40 ms), 60% slower" in within
    said = timing.against_record("planner", 108.0, "ms median", figures)
    assert said.startswith("  REGRESSION: 20% slower than recorded, for this machine's speed") and "80% slower" in said
    assert timing.against_record("planner", 84.0, "ms median", figures).startswith(
        "  7% faster than recorded, for this machine's speed"
    )


def test_the_reference_time_is_measured_once_per_process(timing, monkeypatch):
    monkeypatch.setattr(timing, "_REFERENCE", [])
    calls = []
    monkeypatch.setattr(timing, "_reference_work", lambda _index=0: calls.append(1))
    first = timing.machine_reference_ms()
    assert first >= 0 and timing.machine_reference_ms() == first and len(calls) == 10  # a warm-up and 9 timings
