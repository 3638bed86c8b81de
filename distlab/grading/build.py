"""Build student exercise notebooks from worked solutions (nbgrader's marker convention).

In code cells, the lines from `### BEGIN SOLUTION` to `### END SOLUTION` are replaced by
`NAME = None  # YOUR ANSWER HERE` for every name the block assigns (or `# YOUR CODE HERE`
when it assigns none). In markdown cells, `<!-- BEGIN SOLUTION -->` ... `<!-- END SOLUTION -->`
becomes a placeholder line. Outputs and execution counts are cleared.

A solution that is a lesson of the manifest (distlab.lessons.LESSONS, by its exercise file name)
must name that lesson in its metadata (``metadata["distlab"]["lesson"]``, which the grader reads
first); the exercise gets the same key.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

from .. import lessons
from ..errors import ConfigurationError

__all__ = [
    "MD_PLACEHOLDER",
    "strip_code",
    "strip_markdown",
    "exercise_from_solution",
    "check_lesson_key",
    "render",
    "build",
]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MD_BEGIN, MD_END = "<!-- BEGIN SOLUTION -->", "<!-- END SOLUTION -->"
MD_PLACEHOLDER = "*Your answer here.*"


def _assigned_names(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ConfigurationError(f"solution block is not valid Python: {exc}") from None
    names: list[str] = []
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
    return names


def strip_code(source: str, where: str = "cell") -> str:
    """Replace each solution block of a code cell by answer stubs."""
    out: list[str] = []
    block: list[str] | None = None
    indent = ""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if block is not None:
                raise ConfigurationError(f"{where}: nested {BEGIN}")
            block, indent = [], line[: len(line) - len(line.lstrip())]
        elif stripped == END:
            if block is None:
                raise ConfigurationError(f"{where}: {END} without {BEGIN}")
            import textwrap

            names = _assigned_names(textwrap.dedent("\n".join(block)))
            out.extend(f"{indent}{name} = None  # YOUR ANSWER HERE" for name in names)
            if not names:
                out.append(f"{indent}# YOUR CODE HERE")
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise ConfigurationError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


_MD_BLOCK = re.compile(re.escape(MD_BEGIN) + r".*?" + re.escape(MD_END), re.S)


def strip_markdown(source: str) -> str:
    return _MD_BLOCK.sub(MD_PLACEHOLDER, source)


def exercise_from_solution(nb: "nbformat.NotebookNode", where: str = "notebook") -> "nbformat.NotebookNode":
    """A new notebook: solution blocks stripped, outputs and execution counts cleared."""
    nb = nbformat.from_dict(nb)
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("execution", None)  # nbclient's timestamps: not part of the exercise
        if cell.cell_type == "code":
            cell.source = strip_code(cell.source, f"{where}, cell {index}")
            cell.outputs = []
            cell.execution_count = None
        elif cell.cell_type == "markdown":
            cell.source = strip_markdown(cell.source)
    return nb


def check_lesson_key(nb, name: str) -> None:
    """ConfigurationError when solution `name` is a manifest lesson but its metadata names another lesson."""
    entry = next((l for l in lessons.LESSONS.values() if l.exercise == name), None)
    if entry is None:
        return
    meta = nb.metadata.get("distlab", {})
    key = meta.get("lesson") if isinstance(meta, dict) else None
    if key != entry.slug:
        raise ConfigurationError(f"{name}: metadata distlab.lesson is {key!r}, but the lesson manifest "
                                 f"(distlab.lessons.LESSONS) says {entry.slug!r}")


def render(nb) -> str:
    return nbformat.writes(nb) + "\n"


def build(solutions_dir="solutions", exercises_dir="exercises", check: bool = False) -> list[str]:
    """Write exercises_dir/X.ipynb from solutions_dir/X.ipynb; with check=True only report drift.

    Returns the names of the notebooks that were (or, with check, would be) changed.
    """
    solutions, exercises = Path(solutions_dir), Path(exercises_dir)
    if not solutions.is_dir():
        raise ConfigurationError(f"no solutions folder at {solutions}")
    changed = []
    expected_names = set()
    for path in sorted(solutions.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        check_lesson_key(nb, path.name)
        text = render(exercise_from_solution(nb, str(path)))
        target = exercises / path.name
        expected_names.add(path.name)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            changed.append(path.name)
            if not check:
                exercises.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
    if exercises.is_dir():
        extra = sorted(p.name for p in exercises.glob("*.ipynb") if p.name not in expected_names)
        changed.extend(f"{name} (no solution)" for name in extra)
    return changed
