"""The instructor pack: syllabus, misconceptions, cheat sheet, glossary, bibliography, guide and slides.

`build(out)` renders it all from the repository into `out` (HTML pages and their Markdown, and one reveal.js
slideshow per lesson notebook). Lessons come from the LESSONS manifest (distlab.lessons): a lesson declared there
appears on every page, with a placeholder where its notebook or hand-written text does not exist yet. The
hand-written parts live in the top-level `instructor/` folder (syllabus.toml, misconceptions.md, glossary.md,
guide.md, bibliography.toml, README.md); numbers in misconceptions.md are written `{{slug.qN}}` and replaced by
the graded question's expected value, so they are the numbers distlab computes. The cheat sheet's formulas are
CHEAT_SHEET below: each names the distlab function that computes it (called for the worked example) and its paper.

The build needs no network: nbconvert's slides exporter only writes the reveal.js address (a CDN link, see
REVEAL_NOTE) into the HTML; the browser that opens the slides fetches reveal.js from it.
"""

from __future__ import annotations

import html
import importlib
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package (the instructor extra installs it)
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import lessons as manifest
from .errors import ConfigurationError

__all__ = [
    "PAGES",
    "REVEAL_NOTE",
    "Formula",
    "CHEAT_SHEET",
    "LessonSummary",
    "summarise",
    "CITATION",
    "scan_citations",
    "bibliography",
    "uncovered_citations",
    "fill_numbers",
    "syllabus_markdown",
    "misconceptions_markdown",
    "cheatsheet_markdown",
    "bibliography_markdown",
    "slide_notebook",
    "render_slides",
    "build",
]

PAGES = ("syllabus", "misconceptions", "cheatsheet", "glossary", "bibliography", "guide")

REVEAL_NOTE = (
    "The slides are built offline; each HTML file loads reveal.js (and MathJax, require.js for the "
    "widgets' saved views) from a CDN link when it is opened, so presenting needs a network connection "
    "or a browser cache that holds them."
)


# ----------------------------------------------------------------------------------------------------------------
# The cheat sheet: one formula per row, each computed by a named distlab function and cited.


@dataclass(frozen=True)
class Formula:
    """One cheat-sheet row: the formula with its units, the distlab function that computes it, a worked example
    (a call of that function and a sentence around its result), the bibliography key and the lesson."""

    name: str
    formula: str
    units: str
    function: str  # dotted name under distlab
    example: Callable[[], str]
    source: str  # a bibliography key (instructor/bibliography.toml)
    lesson: str


def _fn(dotted: str):
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise ConfigurationError(f"cheat sheet: {dotted} is not a distlab function") from None


def _gb(x: float) -> str:
    return f"{x / 1e9:,.3g} GB"


def _ex_states():
    w, g, o = _fn("distlab.memory.model_state_bytes")(7e9)
    return f"7B params: {_gb(w)} + {_gb(g)} + {_gb(o)} = {_gb(w + g + o)}"


def _ex_zero():
    total = sum(_fn("distlab.memory.model_state_bytes")(7.5e9, zero=2, dp=64))
    return f"7.5B params, ZeRO-2, dp 64: {_gb(total)} per GPU (the ZeRO paper's Table 1)"


def _ex_activations():
    b = _fn("distlab.memory.activation_bytes_per_layer")("llama2-7b", seq_len=4096, recompute="selective")
    return f"llama2-7b, one 4,096-token sequence, selective: {_gb(b)} per layer"


def _ex_ring():
    t = _fn("distlab.collectives.ring_all_reduce_time")(14e9, 8, 450e9)
    return f"14 GB over 8 GPUs at 450 GB/s, alpha 0: {t * 1e3:,.1f} ms"


def _ex_busbw():
    return f"all-reduce over 8 GPUs: busbw = {_fn('distlab.collectives.bus_factor')('all-reduce', 8):.3f} x algbw"


def _ex_bubble():
    f = _fn("distlab.pipeline.bubble_fraction")(4, 8)
    o = _fn("distlab.pipeline.bubble_overhead")(4, 8)
    return f"p 4, m 8: idle share {f:.1%}, time added {o:.1%}"


def _ex_interleaved():
    return f"p 4, m 8, v 2: time added {_fn('distlab.pipeline.bubble_overhead')(4, 8, chunks=2):.1%}"


def _ex_zb():
    t = _fn("distlab.pipeline.zb_h1_bubble_time")(4, t_f=1.0, t_b=1.0, t_w=1.0)
    return f"p 4, t_F = t_B = t_W = 1 ms: {t:g} ms of bubble (1F1B: (p-1)(t_F+t_B+t_W) = 9 ms)"


def _ex_tp():
    size = _fn("distlab.tensor.tp_message_bytes")(1, 4096, 4096)
    t = _fn("distlab.tensor.tp_comm_time")(size, 8, 450e9)
    return f"llama2-7b layer (b 1, s 4,096, h 4,096, bf16), t 8, 450 GB/s: {size / 1e6:,.1f} MB per all-reduce, {t * 1e3:.3f} ms for 4"


def _ex_ring_attention():
    b = _fn("distlab.tensor.ring_attention_buffer_bytes")(131072, 64, 8192, element_bytes=1.0)
    return f"131,072 tokens over cp 64, width 8,192, FP8: {b / 1e6:,.1f} MB (K+V of one block; no GQA, single buffer)"


def _ex_model_flops():
    f = _fn("distlab.training.model_flops")(70e9, 256 * 8192)
    return f"70B params, 256 x 8,192 tokens: {f / 1e18:,.2f} EFLOP per step"


def _ex_megatron_flops():
    f = _fn("distlab.training.megatron_flops_per_iteration")(1536, 2048, 96, 12288, 51200)
    return f"GPT-3 175B, batch 1,536 x 2,048: {f / 1e18:,.0f} EFLOP per iteration (full recomputation)"


def _ex_mfu():
    m = _fn("distlab.training.mfu")(1e18, 10.0, 256, 989e12)
    return f"1 EFLOP in a 10 s step on 256 GPUs of 989 TFLOP/s: MFU {m:.1%}"


def _ex_days():
    d = _fn("distlab.training.training_days")(70e9, 15e12, 1024, 400e12)
    return f"70B params, 15T tokens, 1,024 GPUs at 400 TFLOP/s achieved, full recomputation: {d:,.0f} days"


def _ex_dp_volume():
    vf = _fn("distlab.dataparallel.volume_factor")
    return f"plain DP, ZeRO-1, ZeRO-2: {vf(0)}M, {vf(1)}M, {vf(2)}M; ZeRO-3: {vf(3)}M per GPU per step"


def _ex_exposed():
    t = _fn("distlab.dataparallel.exposed_communication_time")(0.250, 0.200, buckets=4)
    return f"backward 200 ms, all-reduce 250 ms in 4 equal buckets: {t * 1e3:,.1f} ms exposed"


def _ex_straggler():
    e = _fn("distlab.production.stragglers.expected_max_normal")(256)
    return f"256 GPUs: E[max] = {e:.3f} sigma; with 5 % jitter the step is {e * 5:.1f} % slower than the mean"


def _ex_capacity():
    c = _fn("distlab.moe.cost.expert_capacity")(4096, 8, 2, 1.25)
    return f"4,096 tokens, 8 experts, top-2, capacity factor 1.25: {c:,} token copies per expert"


def _ex_remote_nodes():
    free = _fn("distlab.moe.cost.expected_remote_nodes")(256, 8, 8)
    limited = _fn("distlab.moe.cost.expected_remote_nodes")(256, 8, 8, max_nodes=4)
    return (
        f"DeepSeek-V3, 256 experts, top-8 on 8 nodes: {free:.2f} remote nodes per token; at most 4 nodes: {limited:.2f}"
    )


def _ex_young():
    mtbf = _fn("distlab.failures.job_mtbf")(131072, _fn("distlab.failures.failure_rate_per_gpu_hour")())
    t = _fn("distlab.failures.young_interval")(60.0, mtbf)
    return f"131,072 GPUs at Llama 3's failure rate: MTBF {mtbf / 60:.1f} min; 60 s checkpoints every {t / 60:.1f} min"


def _ex_fsdp_collectives():
    n = _fn("distlab.fsdp.collectives_per_microbatch")(32)
    return f"Llama-2-7B (32 layers), FSDP2 resharding after forward: {n['all-gather']} all-gathers, {n['reduce-scatter']} reduce-scatters"


def _ex_critical_batch():
    b = _fn("distlab.batch.critical_batch_tokens")(2.0)
    return f"at a loss of 2 nats: {b / 1e6:.2f} M tokens"


CHEAT_SHEET: tuple[Formula, ...] = (
    Formula(
        "Model states, mixed precision with Adam",
        "2 + 2 + 12 = 16 bytes x parameters (bf16 weights, bf16 gradients, fp32 master + 2 moments)",
        "bytes",
        "distlab.memory.model_state_bytes",
        _ex_states,
        "rajbhandari2020",
        "Lesson 1 §1",
    ),
    Formula(
        "ZeRO model states per GPU",
        "ZeRO-1: 4P + 12P/N; ZeRO-2: 2P + 14P/N; ZeRO-3: 16P/N",
        "bytes per GPU",
        "distlab.memory.model_state_bytes",
        _ex_zero,
        "rajbhandari2020",
        "Lesson 3 §2",
    ),
    Formula(
        "Activations per layer",
        "none: sbh(34 + 5as/h); selective: 34sbh; full: 2sbh (x b micro-batch)",
        "bytes per layer per micro-batch",
        "distlab.memory.activation_bytes_per_layer",
        _ex_activations,
        "korthikanti2022",
        "Lesson 1 §4",
    ),
    Formula(
        "Ring all-reduce time",
        "2(N-1) alpha + 2 (N-1)/N x M / B",
        "s (M bytes, B bytes/s per direction, alpha s)",
        "distlab.collectives.ring_all_reduce_time",
        _ex_ring,
        "patarasuk2009",
        "Lesson 2 §3",
    ),
    Formula(
        "Bus bandwidth",
        "busbw = algbw x 2(N-1)/N (all-reduce); algbw = M / t",
        "GB/s",
        "distlab.collectives.bus_factor",
        _ex_busbw,
        "thakur2005",
        "Lesson 2 §6",
    ),
    Formula(
        "Data-parallel traffic per step",
        "2M (DP, ZeRO-1, ZeRO-2), 3M (ZeRO-3), M = gradient bytes",
        "bytes per GPU",
        "distlab.dataparallel.volume_factor",
        _ex_dp_volume,
        "rajbhandari2020",
        "Lesson 3 §4",
    ),
    Formula(
        "Exposed communication with buckets",
        "max(c/B, c - (B-1)/B x t_backward) for B equal buckets, c the whole all-reduce",
        "s",
        "distlab.dataparallel.exposed_communication_time",
        _ex_exposed,
        "li2020",
        "Lesson 3 §5",
    ),
    Formula(
        "Pipeline bubble (GPipe, 1F1B)",
        "idle share (p-1)/(m+p-1); time added (p-1)/m",
        "fraction",
        "distlab.pipeline.bubble_fraction",
        _ex_bubble,
        "huang2019",
        "Lesson 4 §3",
    ),
    Formula(
        "Interleaved 1F1B bubble",
        "time added (p-1)/(v m)",
        "fraction",
        "distlab.pipeline.bubble_overhead",
        _ex_interleaved,
        "narayanan2021",
        "Lesson 4 §2",
    ),
    Formula(
        "ZB-H1 bubble",
        "(p-1)(t_F + t_B - t_W)",
        "s",
        "distlab.pipeline.zb_h1_bubble_time",
        _ex_zb,
        "qi2023",
        "Lesson 4 §2",
    ),
    Formula(
        "Tensor-parallel traffic per layer",
        "4 all-reduces of b s h x 2 bytes (2 forward, 2 backward)",
        "s",
        "distlab.tensor.tp_comm_time",
        _ex_tp,
        "shoeybi2019",
        "Lesson 5 §4",
    ),
    Formula(
        "Ring-attention K/V buffer",
        "2 x S/N x H x bytes (as lesson 5 states it)",
        "bytes per GPU",
        "distlab.tensor.ring_attention_buffer_bytes",
        _ex_ring_attention,
        "liu2023",
        "Lesson 5 §7",
    ),
    Formula(
        "Model FLOPs per step, the 6PT rule of thumb (no attention; the step model counts it: flops.step_flops)",
        "6 x parameters x tokens",
        "FLOP",
        "distlab.training.model_flops",
        _ex_model_flops,
        "kaplan2020",
        "Lesson 7 §1",
    ),
    Formula(
        "Megatron FLOPs per iteration",
        "96 B s l h^2 (1 + s/(6h) + V/(16 l h))",
        "FLOP",
        "distlab.training.megatron_flops_per_iteration",
        _ex_megatron_flops,
        "narayanan2021",
        "Lesson 7 §1",
    ),
    Formula(
        "MFU",
        "model FLOPs per step / (step time x GPUs x peak FLOP/s)",
        "fraction",
        "distlab.training.mfu",
        _ex_mfu,
        "chowdhery2022",
        "Lesson 7 §1",
    ),
    Formula(
        "Time to train",
        "8 T P / (n X) with full recomputation (6 without)",
        "days",
        "distlab.training.training_days",
        _ex_days,
        "narayanan2021",
        "Lesson 12 §2",
    ),
    Formula(
        "Slowest of n GPUs",
        "E[max of n standard normals] x sigma",
        "sigma",
        "distlab.production.stragglers.expected_max_normal",
        _ex_straggler,
        "tippett1925",
        "Lesson 8b §2",
    ),
    Formula(
        "Expert capacity",
        "ceil(capacity factor x tokens x top_k / experts)",
        "token copies per expert",
        "distlab.moe.cost.expert_capacity",
        _ex_capacity,
        "lepikhin2021",
        "Lesson 10 §3",
    ),
    Formula(
        "Remote nodes a token's experts reach",
        "n (1 - C(E - E/n, k) / C(E, k)) (n-1)/n without a limit; M (n-1)/n with node-limited routing to M nodes",
        "nodes per token",
        "distlab.moe.cost.expected_remote_nodes",
        _ex_remote_nodes,
        "deepseek2024",
        "Lesson 10 §5",
    ),
    Formula(
        "FSDP collectives per microbatch",
        "all-gathers: L forward + (L - 1) backward with reshard after forward; reduce-scatters: L",
        "collectives",
        "distlab.fsdp.collectives_per_microbatch",
        _ex_fsdp_collectives,
        "zhao2023",
        "Lesson 11 §2",
    ),
    Formula(
        "Job MTBF and Young's checkpoint interval",
        "MTBF = 1 / (N lambda); interval = sqrt(2 x checkpoint time x MTBF)",
        "s",
        "distlab.failures.young_interval",
        _ex_young,
        "young1974",
        "Lesson 11b §2",
    ),
    Formula(
        "Critical batch",
        "B_crit = B_* / L^(1/alpha_B), B_* = 2e8 tokens, alpha_B = 0.21",
        "tokens",
        "distlab.batch.critical_batch_tokens",
        _ex_critical_batch,
        "kaplan2020",
        "Lesson 11b §3",
    ),
)


# ----------------------------------------------------------------------------------------------------------------
# Reading the repository


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(
            f"no {path.name} at {path} (the instructor pack's sources live in instructor/)"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML: {exc}") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"no {path.name} at {path} (the instructor pack's sources live in instructor/)"
        ) from None


def _notebook(repo: Path, lesson):
    import nbformat

    path = repo / lesson.notebook
    return nbformat.read(path, as_version=4) if path.is_file() else None


@dataclass
class LessonSummary:
    number: str  # the lesson's label: "8", or "8b" for a split lesson's second part
    slug: str
    notebook: str
    title: str
    objectives: str
    sections: list[str]
    remember: str
    minutes: int | None
    questions: int
    builds_on: list[str]
    present: bool


def _markdown_cells(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def summarise(repo: Path, lesson, syllabus: dict) -> LessonSummary:
    """What the syllabus says about one lesson, read from its notebook (a placeholder when there is none)."""
    extra = syllabus.get("lessons", {}).get(lesson.slug, {})
    builds_on = list(extra.get("builds_on", []))
    questions = len(lesson.load_questions()) if lesson.questions else 0
    nb = _notebook(repo, lesson)
    if nb is None:
        return LessonSummary(
            lesson.label,
            lesson.slug,
            lesson.notebook,
            lesson.slug.replace("_", " "),
            "(declared in the LESSONS manifest; its notebook is not in the repository yet)",
            [],
            "",
            None,
            questions,
            builds_on,
            False,
        )
    md = _markdown_cells(nb)
    text = "\n\n".join(md)
    title = next((l[2:].strip() for s in md for l in s.splitlines() if l.startswith("# ")), lesson.slug)
    title = re.sub(r"^Lesson \d+[a-z]?\s*[—:-]\s*", "", title)
    match = re.search(r"By the end[^,]*, you can (.+?\.)(?:\s|$)", text, re.S) or re.search(
        r"By the end[^.]*? you can (.+?\.)(?:\s|$)", text, re.S
    )
    if match:
        objectives = "You can " + " ".join(match.group(1).split())
    else:
        question = re.search(r"\*\*The question\.\*\*(.+?)(?:\n\n|$)", text, re.S)
        objectives = "Answers: " + " ".join(question.group(1).split()) if question else "(no objectives stated)"
    sections = [l[3:].strip() for s in md for l in s.splitlines() if l.startswith("## ")]
    remember = next((s.split("\n", 1)[1].strip() for s in md if s.startswith("## What to remember") and "\n" in s), "")
    words = sum(len(s.split()) for s in md)
    code = sum(1 for c in nb.cells if c.cell_type == "code")
    minutes = (
        words / syllabus.get("reading_words_per_minute", 120)
        + code * syllabus.get("minutes_per_code_cell", 3)
        + questions * syllabus.get("minutes_per_question", 6)
    )
    return LessonSummary(
        lesson.label,
        lesson.slug,
        lesson.notebook,
        title,
        objectives,
        sections,
        remember,
        int(5 * round(minutes / 5)),
        questions,
        builds_on,
        True,
    )


CITATION = re.compile(r"\b([A-Z][\w'\-]+(?: et al\.| (?:and|&) [A-Z][\w'\-]+)?),? \(?((?:19|20)\d\d)[a-z]?\b")
_NOT_AUTHORS = {
    "In",
    "Since",
    "From",
    "Until",
    "By",
    "The",
    "Of",
    "As",
    "At",
    "On",
    "Before",
    "After",
    "Table",
    "Figure",
    "Sec",
    "Eq",
    "Lesson",
    "GPT",
    "Llama",
    "NVIDIA",
    "H100",
    "A100",
    "B200",
    "CUDA",
    "Python",
    "November",
    "December",
    "January",
    "Nov",
    "Dec",
    "Jan",
    "May",
    "June",
    "July",
    "March",
    "April",
    "ISO",
    "FP8",
    "GTC",
    "MLSys",
    "NeurIPS",
    "ICLR",
    "SC",
    "Summer",
    "Spring",
    "Fall",
    "Winter",
    "Version",
    "Copyright",
    "Opus",
    "Claude",
}


def scan_citations(repo: Path) -> dict[str, set[str]]:
    """Every "Author [et al.] YEAR" citation in distlab/ (Python and data) and the notebooks' markdown and code:
    {"Huang et al. 2019": {files citing it}}. Words that are not authors (months, "Table", model names) are
    skipped by a short stop list."""
    import nbformat

    found: dict[str, set[str]] = {}
    sources = []
    for path in sorted((repo / "distlab").rglob("*")):
        if path.suffix in (".py", ".json", ".toml") and path.is_file():
            sources.append((path, path.read_text(encoding="utf-8")))
    for path in sorted((repo / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        sources.append((path, "\n".join(c.source for c in nb.cells)))
    for path, text in sources:
        for m in CITATION.finditer(text):
            author = m.group(1)
            first = author.split(",")[0].split()[0]
            if first in _NOT_AUTHORS or author.split()[-1] in _NOT_AUTHORS:
                continue
            found.setdefault(f"{author} {m.group(2)}", set()).add(str(path.relative_to(repo)))
    return found


def bibliography(repo: Path) -> list[dict]:
    data = _read_toml(repo / "instructor" / "bibliography.toml")
    works = data.get("work", [])
    for w in works:
        for key in ("key", "cited_as", "reference", "used_for"):
            if key not in w:
                raise ConfigurationError(f"instructor/bibliography.toml: an entry lacks {key!r}: {w}")
    return works


def uncovered_citations(repo: Path) -> dict[str, set[str]]:
    """The scanned citations that no bibliography entry lists in its cited_as (the test wants none)."""
    covered = {c for w in bibliography(repo) for c in w["cited_as"]}
    return {c: f for c, f in scan_citations(repo).items() if c not in covered}


# ----------------------------------------------------------------------------------------------------------------
# Rendering


def _number(value) -> str:
    x = float(f"{float(value):.3g}")
    return f"{int(x):,}" if x == int(x) else f"{x:,}"


def fill_numbers(text: str) -> str:
    """Replace {{slug.qN}} by the expected answer of that graded question (3 significant figures; a choice
    question's option as it is written)."""

    def one(m):
        slug, name = m.group(1), m.group(2)
        try:
            q = manifest.lesson(slug).load_questions()[name]
        except KeyError:
            raise ConfigurationError(f"instructor pack: {{{{{slug}.{name}}}}} names no graded question") from None
        want = q.expected()
        return f"`{want}`" if isinstance(want, str) else _number(want)

    return re.sub(r"\{\{\s*(\w+)\.(q\d+)\s*\}\}", one, text)


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.3rem .5rem;vertical-align:top}
code{background:#f3f3f3;padding:0 .2rem}nav a{margin-right:1rem}"""


def _html_page(title: str, body_markdown: str) -> str:
    from nbconvert.filters import markdown2html_mistune

    nav = " ".join(f'<a href="{p}.html">{p}</a>' for p in PAGES) + ' <a href="index.html">index</a>'
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><nav>{nav}</nav>\n{markdown2html_mistune(body_markdown)}\n"
        "</body></html>\n"
    )


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def syllabus_markdown(repo: Path, summaries: list[LessonSummary], syllabus: dict) -> str:
    lines = ["# Syllabus", "", "## Prerequisites", ""]
    lines += [f"- {p}" for p in syllabus.get("course_prerequisites", [])]
    wpm, code, per_q = (
        syllabus.get("reading_words_per_minute", 120),
        syllabus.get("minutes_per_code_cell", 3),
        syllabus.get("minutes_per_question", 6),
    )
    total = sum(s.minutes or 0 for s in summaries)
    lines += [
        "",
        "## Lessons at a glance",
        "",
        f"Minutes are estimated from each notebook: its markdown read at {wpm} words a minute, {code} minutes "
        f"per code cell and {per_q} per graded question (instructor/syllabus.toml), rounded to 5. "
        f"Total for the lessons present: {total} minutes ({total / 60:.1f} hours).",
        "",
        "| # | lesson | minutes | graded questions | builds on |",
        "|---|---|---|---|---|",
    ]
    by_slug = {s.slug: s.number for s in summaries}
    for s in summaries:
        builds = ", ".join(f"{by_slug.get(b, b)}" for b in s.builds_on) or "-"
        minutes = s.minutes if s.present else "not written yet"
        lines.append(f"| {s.number} | {_cell(s.title)} | {minutes} | {s.questions} | {builds} |")
    lines += ["", "## Learning objectives and contents", ""]
    for s in summaries:
        lines += [
            f"### Lesson {s.number}: {s.title}",
            "",
            f"Notebook `{s.notebook}`.",
            "",
            f"**Objectives.** {s.objectives}",
            "",
        ]
        if s.sections:
            lines += ["**Sections.** " + "; ".join(s.sections), ""]
        if s.remember:
            lines += ["**What to remember** (the notebook's own summary):", "", s.remember, ""]
    return "\n".join(lines) + "\n"


def misconceptions_markdown(repo: Path, summaries: list[LessonSummary]) -> str:
    text = fill_numbers(_read_text(repo / "instructor" / "misconceptions.md"))
    have = set(re.findall(r"^## Lesson (\d+[a-z]?)\s*$", text, re.M))
    missing = [s for s in summaries if s.number not in have]
    if missing:
        text += "\n## Lessons without a misconception list yet\n\n" + "".join(
            f"- Lesson {s.number} ({s.slug}): not written yet; add a `## Lesson {s.number}` section to "
            "instructor/misconceptions.md.\n"
            for s in missing
        )
    return text


def cheatsheet_markdown() -> str:
    lines = [
        "# Cheat sheet: the formulas, their units, the distlab function and the paper",
        "",
        "Each worked example is computed by calling the function named beside it when this page is built.",
        "",
        "| quantity | formula | units | distlab function | worked example | source | lesson |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in CHEAT_SHEET:
        lines.append(
            f"| {_cell(f.name)} | {_cell(f.formula)} | {_cell(f.units)} | `{f.function}` | "
            f"{_cell(f.example())} | [{f.source}](bibliography.html#{f.source}) | {f.lesson} |"
        )
    return "\n".join(lines) + "\n"


def bibliography_markdown(repo: Path) -> str:
    works = bibliography(repo)
    scanned = scan_citations(repo)
    lines = [
        "# Bibliography",
        "",
        "Every work cited by author and year in `distlab/` and `notebooks/`, found by "
        "scanning the sources (`distlab.instructor_pack.scan_citations`), with what the kit uses it for.",
        "",
    ]
    for w in sorted(works, key=lambda w: w["key"]):
        files = sorted({f for c in w["cited_as"] for f in scanned.get(c, ())})
        lines += [
            f'<a id="{w["key"]}"></a>',
            "",
            f"**{w['key']}**: {w['reference']}",
            "",
            f"Used for: {w['used_for']}",
            "",
            "Cited in: " + (", ".join(f"`{f}`" for f in files) if files else "(no longer cited by name)"),
            "",
        ]
    missing = {c: f for c, f in scanned.items() if c not in {c for w in works for c in w["cited_as"]}}
    if missing:
        lines += ["## Cited but not yet in instructor/bibliography.toml", ""]
        lines += [f"- {c}: {', '.join(sorted(f))}" for c, f in sorted(missing.items())]
    return "\n".join(lines) + "\n"


def slide_notebook(nb):
    """A copy of a lesson notebook with reveal.js slide types: a new slide at every # or ## heading, a vertical
    sub-slide at every ### heading and for each code cell with its output, the rest flowing on."""
    import copy

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        first = cell.source.lstrip().split("\n", 1)[0]
        if cell.cell_type == "markdown" and (first.startswith("# ") or first.startswith("## ")):
            kind = "slide"
        elif cell.cell_type == "markdown" and first.startswith("### "):
            kind = "subslide"
        elif cell.cell_type == "code":
            kind = "subslide"
        else:
            kind = "-"
        cell.metadata["slideshow"] = {"slide_type": kind}
    return nb


def render_slides(nb, hide_code: bool = False) -> str:
    from nbconvert import SlidesExporter

    exporter = SlidesExporter()
    exporter.reveal_scroll = True  # long cells scroll instead of being cut off
    exporter.exclude_input = hide_code
    body, _ = exporter.from_notebook_node(slide_notebook(nb))
    return body


def build(out, repo=".", hide_code: bool = False, slides: bool = True) -> list[Path]:
    """Write the instructor pack under `out`; return the files written."""
    repo, out = Path(repo), Path(out)
    if not (repo / "distlab").is_dir() or not (repo / "instructor").is_dir():
        raise ConfigurationError(f"--repo {repo}: not a distlab repository (needs distlab/ and instructor/)")
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"--out {out}: exists and is not a folder")
    syllabus = _read_toml(repo / "instructor" / "syllabus.toml")
    summaries = [
        summarise(repo, l, syllabus) for l in sorted(manifest.LESSONS.values(), key=lambda l: (l.number, l.part))
    ]
    pages = {
        "syllabus": syllabus_markdown(repo, summaries, syllabus),
        "misconceptions": misconceptions_markdown(repo, summaries),
        "cheatsheet": cheatsheet_markdown(),
        "glossary": _read_text(repo / "instructor" / "glossary.md"),
        "bibliography": bibliography_markdown(repo),
        "guide": _read_text(repo / "instructor" / "guide.md"),
    }
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages.items():
        for suffix, content in ((".md", text), (".html", _html_page(name, text))):
            path = out / f"{name}{suffix}"
            path.write_text(content, encoding="utf-8")
            written.append(path)
    slide_lines = []
    for s, lesson in zip(summaries, sorted(manifest.LESSONS.values(), key=lambda l: (l.number, l.part))):
        if not s.present:
            slide_lines.append(f"- Lesson {s.number}: no notebook yet ({s.notebook})")
            continue
        if not slides:
            slide_lines.append(f"- Lesson {s.number}: {s.title} (slides not built: --no-slides)")
            continue
        (out / "slides").mkdir(exist_ok=True)
        path = out / "slides" / (Path(lesson.notebook).stem + ".slides.html")
        path.write_text(render_slides(_notebook(repo, lesson), hide_code), encoding="utf-8")
        written.append(path)
        slide_lines.append(f"- [Lesson {s.number}: {s.title}](slides/{path.name})")
    readme = _read_text(repo / "instructor" / "README.md")
    index = (
        readme
        + "\n## Pages\n\n"
        + "".join(f"- [{p}]({p}.html)\n" for p in PAGES)
        + "\n## Slides\n\n"
        + "\n".join(slide_lines)
        + "\n\n"
        + REVEAL_NOTE
        + "\n"
    )
    for suffix, content in ((".md", index), (".html", _html_page("instructor pack", index))):
        path = out / f"index{suffix}"
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written
