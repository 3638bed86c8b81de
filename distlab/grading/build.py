"""Build student exercise notebooks from worked solutions (nbgrader's marker convention).

In code cells, the lines from `### BEGIN SOLUTION` to `### END SOLUTION` are replaced by
`answer_qN = None  # YOUR ANSWER HERE` for every answer variable (a name starting with `answer_`)
the block assigns, or `# YOUR CODE HERE` when it assigns none. The block's other names (its
intermediate steps), its comments and its imports are dropped: they would give the solution's
decomposition away. Code outside the blocks that reads such a name is refused (the exercise
would fail with a NameError). A code cell that only shows worked answers (`q2.solution()`) is
left out of the exercise; a `.solution()` call mixed with other code is refused. In markdown
cells, `<!-- BEGIN SOLUTION -->` ... `<!-- END SOLUTION -->` becomes a placeholder line. A marker without its
pair, nested, or written otherwise (the words BEGIN SOLUTION / END SOLUTION in any other form) is refused: a
block the build does not see would reach the students whole. Outputs and execution counts are cleared.

What else passes from a solution to its exercise is an allow-list (red team round 26 02: a solution's saved widget
state, which holds what its cells printed, a markdown image attached to a solution block and any cell metadata
were copied as they were): the notebook metadata's KEPT_METADATA, each cell's KEPT_CELL_METADATA, and a markdown
(or raw) cell's attachments that its exercise text still shows. The notebook and each cell are made anew (red team
round 27 01: a raw cell passed whole, and keys beside the schema's with it): a raw cell's text is read as markdown's.

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
from .answers import ANSWER_PREFIX

__all__ = [
    "MD_PLACEHOLDER",
    "KEPT_METADATA",
    "KEPT_CELL_METADATA",
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
#: the notebook metadata an exercise keeps of its solution's (the rest, such as saved widget state, may hold what
#: the solution computed), and the cell metadata each of its cells keeps
KEPT_METADATA = ("kernelspec", "language_info", "distlab")
KEPT_CELL_METADATA = ("tags",)
#: the words of a marker (in capitals, or in any case after # or <!--): a line (code) or text (markdown) holding
#: them must be the marker itself
_MARKER_WORDS = re.compile(r"\b(?:BEGIN|END)\s*SOLUTION\b|(?:#|<!--)\s*(?i:begin|end)\s*(?i:solution)")


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
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                if name not in names:
                    names.append(name)
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name) and sub.id not in names:
                    names.append(sub.id)
    return names


def _is_answer(name: str) -> bool:
    return name.startswith(ANSWER_PREFIX)


def _block_names(source: str, where: str) -> list[str]:
    """Every name the solution blocks of a code cell assign or import."""
    import textwrap

    assigned: list[str] = []
    block: list[str] | None = None
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            block = []
        elif stripped == END and block is not None:
            assigned += [n for n in _assigned_names(textwrap.dedent("\n".join(block))) if n not in assigned]
            block = None
        elif block is not None:
            block.append(line)
    return assigned


def _parse(code: str, where: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ConfigurationError(f"{where}: the code outside the solution blocks is not valid Python: {exc}") from None


def _shows_solution(node) -> bool:
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "solution"
        for sub in ast.walk(node)
    )


def _only_shows_solutions(source: str, where: str) -> bool:
    """True for a cell made only of `qN.solution()` calls (a worked-answer demo: not part of an exercise);
    ConfigurationError for a `.solution()` call mixed with other code outside the solution blocks."""
    tree = _parse(strip_code(source, where), where)
    showing = [_shows_solution(node) for node in tree.body]
    if showing and all(showing):
        return True
    if any(showing):
        raise ConfigurationError(
            f"{where}: a .solution() call outside a solution block, mixed with other code; "
            "put it in a cell of its own (left out of the exercise) or inside the block"
        )
    return False


def strip_code(source: str, where: str = "cell") -> str:
    """Replace each solution block of a code cell by stubs for its answer variables (answer_*) only."""
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

            names = [n for n in _assigned_names(textwrap.dedent("\n".join(block))) if _is_answer(n)]
            out.extend(f"{indent}{name} = None  # YOUR ANSWER HERE" for name in names)
            if not names:  # an indented block still needs a statement to stay valid Python
                out.append(f"{indent}# YOUR CODE HERE" if not indent else f"{indent}...  # YOUR CODE HERE")
            block = None
        elif _MARKER_WORDS.search(line):
            raise ConfigurationError(
                f"{where}: {line.strip()[:60]!r} is not a solution marker (write {BEGIN!r} or {END!r} on a line of "
                "its own): the build would not see the block, and the students would get it whole"
            )
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise ConfigurationError(f"{where}: {BEGIN} without {END}")
    return "\n".join(out)


_MD_MARKER = re.compile(re.escape(MD_BEGIN) + "|" + re.escape(MD_END))


def strip_markdown(source: str, where: str = "cell") -> str:
    """Each `<!-- BEGIN SOLUTION -->` ... `<!-- END SOLUTION -->` block replaced by MD_PLACEHOLDER; ConfigurationError
    for a marker without its pair, a nested one, or the marker words written any other way."""
    out, begun, at = [], None, 0
    for match in _MD_MARKER.finditer(source):
        if (match.group() == MD_BEGIN) == (begun is not None):
            raise ConfigurationError(
                f"{where}: {match.group()} " + ("inside another block" if begun is not None else f"without {MD_BEGIN}")
            )
        if begun is None:
            out.append(source[at : match.start()])
            begun = match
        else:
            out.append(MD_PLACEHOLDER)
            begun, at = None, match.end()
    if begun is not None:
        raise ConfigurationError(f"{where}: {MD_BEGIN} without {MD_END}: the students would get the block whole")
    out.append(source[at:])
    stripped = "".join(out)
    if _MARKER_WORDS.search(stripped):
        raise ConfigurationError(
            f"{where}: the words BEGIN/END SOLUTION outside a marker (write {MD_BEGIN} and {MD_END} exactly): the "
            "build would not see the block, and the students would get it whole"
        )
    return stripped


_ATTACHMENT = re.compile(r"attachment:([^\s)\"'>]+)")


def _kept_attachments(attachments, text: str) -> dict:
    """Only the attachments the (stripped) `text` still shows: one a solution block showed goes with the block."""
    if not isinstance(attachments, dict):
        return {}
    shown = set(_ATTACHMENT.findall(text))
    return {name: data for name, data in attachments.items() if name in shown}


#: a cell id as nbformat 4.5's schema allows it (kept, so a build is the same each time); any other is not copied
_CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _exercise_cell(cell, where: str):
    """The exercise's cell made anew from `cell` with only what an exercise may hold (red team round 27 01: a raw
    cell passed whole, its solution markers unread and its attachments all kept, and any key a cell carried besides
    the schema's, an image attached to a code cell, reached the exercise): its source stripped (a raw cell's as
    markdown's, so its markers are read or refused), KEPT_CELL_METADATA, the attachments its text still shows, and
    its id when the schema's. A cell of another type is refused."""
    v4 = nbformat.v4
    metadata = {k: cell.metadata[k] for k in KEPT_CELL_METADATA if k in cell.get("metadata", {})}
    if cell.get("cell_type") == "code":
        made = v4.new_code_cell(strip_code(cell.source, where), metadata=metadata)
    elif cell.get("cell_type") in ("markdown", "raw"):
        new = v4.new_markdown_cell if cell.cell_type == "markdown" else v4.new_raw_cell
        made = new(strip_markdown(cell.source, where), metadata=metadata)
        attachments = _kept_attachments(cell.get("attachments"), made.source)
        if attachments:
            made.attachments = nbformat.from_dict(attachments)
    else:
        raise ConfigurationError(f"{where}: a {cell.get('cell_type')!r} cell (an exercise holds code, markdown, raw)")
    if isinstance(cell.get("id"), str) and _CELL_ID.fullmatch(cell.id):
        made.id = cell.id
    return made


def _check_no_solution_only_names(nb, where: str) -> None:
    """ConfigurationError when code outside the solution blocks reads a name only a block defines
    (other than an answer variable, which the exercise keeps as a stub)."""
    solution_only: set[str] = set()
    defined_outside: set[str] = set()
    reads: list[tuple[int, set[str]]] = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        stubbed = strip_code(cell.source, f"{where}, cell {index}")
        solution_only.update(n for n in _block_names(cell.source, where) if not _is_answer(n))
        tree = _parse(stubbed, f"{where}, cell {index}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined_outside.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined_outside.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                defined_outside.update((a.asname or a.name).split(".")[0] for a in node.names)
        reads.append((index, {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}))
    for index, names in reads:
        leaked = sorted(names & (solution_only - defined_outside))
        if leaked:
            raise ConfigurationError(
                f"{where}, cell {index}: code outside the solution blocks reads "
                f"{', '.join(leaked)}, which only a solution block defines; the exercise "
                "drops it (name it answer_... or move the use into the block)"
            )


def exercise_from_solution(nb: "nbformat.NotebookNode", where: str = "notebook") -> "nbformat.NotebookNode":
    """A new notebook: solution blocks stripped to answer stubs, worked-answer cells left out, outputs and
    execution counts cleared."""
    nb = nbformat.from_dict(nb)
    _check_no_solution_only_names(nb, where)
    metadata = {k: nb.metadata[k] for k in KEPT_METADATA if k in nb.metadata}
    cells = [
        cell
        for index, cell in enumerate(nb.cells)
        if not (cell.cell_type == "code" and _only_shows_solutions(cell.source, f"{where}, cell {index}"))
    ]
    # made anew: no key of the solution's notebook or cells passes but those named here
    exercise = nbformat.v4.new_notebook(metadata=nbformat.from_dict(metadata))
    exercise.cells = [_exercise_cell(cell, f"{where}, cell {index}") for index, cell in enumerate(cells)]
    return exercise


def check_lesson_key(nb, name: str) -> None:
    """ConfigurationError when solution `name` is a manifest lesson but its metadata names another lesson."""
    entry = next((l for l in lessons.LESSONS.values() if l.exercise == name), None)
    if entry is None:
        return
    meta = nb.metadata.get("distlab", {})
    key = meta.get("lesson") if isinstance(meta, dict) else None
    if key != entry.slug:
        raise ConfigurationError(
            f"{name}: metadata distlab.lesson is {key!r}, but the lesson manifest "
            f"(distlab.lessons.LESSONS) says {entry.slug!r}"
        )


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
