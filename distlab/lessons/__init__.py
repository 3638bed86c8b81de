"""The lessons: one question module per lesson, and LESSONS, the one manifest of what each lesson is.

LESSONS maps a lesson's slug (its notebook's name without the number) to its notebook, its
exercise notebook (the same file name in solutions/ and exercises/), the library modules it
teaches, the widget apps it shows and its question module. The grader, the exercise builder,
and the tests (README table, notebooks, widget fuzzing) read it; nothing else lists lessons.

    >>> from distlab.lessons import LESSONS, lesson
    >>> LESSONS["pipeline"].number, LESSONS["pipeline"].notebook
    (4, 'notebooks/04_pipeline.ipynb')
    >>> lesson("data_parallel").slug  # an older name, still accepted for submitted notebooks
    'data_parallel_zero'
    >>> LESSONS["failure_triage"].label, LESSONS["failure_triage"].notebook  # a second part keeps 9-11's numbers
    ('8b', 'notebooks/08b_failure_triage.ipynb')
    >>> LESSONS["long_runs"].label, LESSONS["long_runs"].notebook  # lesson 11's second part
    ('11b', 'notebooks/11b_long_runs.ipynb')

This module imports nothing from the library: loading the manifest stays cheap.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["Lesson", "LESSONS", "NAMES", "lesson", "graded"]


@dataclass(frozen=True)
class Lesson:
    """One lesson: its number, notebook, exercise, library modules, widget apps and questions.

    apps are dotted names "distlab.widgets.<module>.<Class>"; questions the dotted name of the
    module holding QUESTIONS (None: a lesson without graded exercises); aliases are older
    slugs that notebooks submitted before a rename still carry; part is "" or a letter for the second
    part of a split lesson (lesson 8b follows lesson 8, and lessons 9-11 keep their numbers; 11b follows 11).
    """

    number: int
    slug: str
    notebook: str
    exercise: str | None = None
    modules: tuple[str, ...] = ()
    apps: tuple[str, ...] = ()
    questions: str | None = None
    aliases: tuple[str, ...] = ()
    part: str = ""

    @property
    def label(self) -> str:
        """The lesson's number as the course writes it: "8", or "8b" for a second part."""
        return f"{self.number}{self.part}"

    def question_module(self):
        """The imported question module (None for a lesson without questions)."""
        return importlib.import_module(self.questions) if self.questions else None

    def load_questions(self) -> dict:
        """The lesson's QUESTIONS dict ({} without questions)."""
        module = self.question_module()
        return getattr(module, "QUESTIONS", {}) if module is not None else {}

    def load_apps(self) -> list:
        """The widget app classes the lesson shows, imported."""
        out = []
        for dotted in self.apps:
            module, _, name = dotted.rpartition(".")
            out.append(getattr(importlib.import_module(module), name))
        return out


def _lesson(
    number: int,
    slug: str,
    *,
    part: str = "",
    stem: str | None = None,
    exercise: bool = True,
    modules=(),
    apps=(),
    aliases=(),
) -> Lesson:
    name = f"{number:02d}{part}_{stem or slug}.ipynb"
    return Lesson(
        number,
        slug,
        f"notebooks/{name}",
        name if exercise else None,
        tuple(modules),
        tuple(apps),
        f"{__name__}.{slug}" if exercise else None,
        tuple(aliases),
        part,
    )


LESSONS: dict[str, Lesson] = {
    lesson.slug: lesson
    for lesson in (
        _lesson(1, "memory_wall", modules=["memory"], apps=["distlab.widgets.memory_wall.MemoryWallApp"]),
        _lesson(2, "collectives", modules=["collectives"], apps=["distlab.widgets.collectives.RingAllReduceApp"]),
        _lesson(
            3,
            "data_parallel_zero",
            modules=["dataparallel", "memory", "collectives"],
            apps=["distlab.widgets.data_parallel_zero.ZeroMemoryApp", "distlab.widgets.data_parallel_zero.OverlapApp"],
            aliases=["data_parallel"],
        ),
        _lesson(
            4,
            "pipeline",
            modules=["pipeline", "memory", "training"],
            apps=["distlab.widgets.pipeline.BubbleGridApp", "distlab.widgets.pipeline.StageAnalysisApp"],
        ),
        _lesson(
            5,
            "tensor_parallel",
            modules=["tensor", "collectives"],
            apps=["distlab.widgets.tensor_parallel.TensorParallelApp"],
        ),
        _lesson(
            6,
            "parallelism_3d",
            stem="3d_parallelism",
            modules=["mesh", "memory", "pipeline", "tensor", "collectives"],
            apps=["distlab.widgets.parallelism_3d.MeshApp"],
        ),
        _lesson(
            7,
            "training_lab",
            modules=["training", "planner", "export"],
            apps=["distlab.widgets.training_lab.TrainingLabApp"],
        ),
        _lesson(
            8,
            "production",
            modules=["production", "dataparallel", "memory", "training"],
            apps=["distlab.widgets.production.BucketApp"],
        ),
        _lesson(
            8,
            "failure_triage",
            part="b",
            modules=["production", "memory", "training"],
            apps=["distlab.widgets.production.ProductionStepApp", "distlab.widgets.production.TriageApp"],
        ),
        _lesson(9, "verify_with_pytorch", exercise=False, modules=["verify", "memory", "collectives", "pipeline"]),
        _lesson(
            10,
            "mixture_of_experts",
            modules=["moe", "mesh", "collectives"],
            apps=[
                "distlab.widgets.mixture_of_experts.AllToAllApp",
                "distlab.widgets.mixture_of_experts.ImbalanceApp",
                "distlab.widgets.mixture_of_experts.PlacementApp",
            ],
        ),
        _lesson(
            11,
            "training_at_scale",
            modules=["pipeline", "fsdp", "production"],
            apps=["distlab.widgets.training_at_scale.ScheduleApp", "distlab.widgets.training_at_scale.FsdpApp"],
        ),
        _lesson(
            11,
            "long_runs",
            part="b",
            modules=["production", "failures", "batch"],
            apps=["distlab.widgets.training_at_scale.ContextApp", "distlab.widgets.training_at_scale.CheckpointApp"],
        ),
        _lesson(
            12,
            "capstone",
            modules=["budget", "training", "planner"],
            apps=["distlab.widgets.training_lab.TrainingLabApp"],
        ),
    )
}

#: every name a lesson answers to (slug or older alias) -> its slug
NAMES: dict[str, str] = {**{a: l.slug for l in LESSONS.values() for a in l.aliases}, **{s: s for s in LESSONS}}


def lesson(name: str) -> Lesson:
    """The lesson called `name` (its slug or an older alias); KeyError if there is none."""
    return LESSONS[NAMES[name]]


def graded() -> dict[str, Lesson]:
    """The lessons with graded questions, by slug, in lesson order."""
    return {slug: l for slug, l in LESSONS.items() if l.questions}
