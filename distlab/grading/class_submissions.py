"""Which notebooks a class run grades, and whose each is (distlab.grading.classroom).

Every notebook under what the instructor named is one row, keyed by its path relative to the common folder of
what was given (``s1/x.ipynb`` and ``s2/x.ipynb`` are two rows); a notebook given twice is refused.

Which student a notebook belongs to (for per-student variants, distlab.grading.variants): the first folder
under what the instructor named (the one folder given, else the common folder of all given; nbgrader and
``distlab exercises --variants`` lay them out as ``submitted/<student>/x.ipynb``), never a folder inside a
student's upload; with ``export=True`` (``--export``) the one folder given is a Gradescope export and its
``submission_metadata.yml`` names the submitter of each ``submission_N`` folder (no other such file is read);
otherwise the notebook names no student and, with a roster, is refused (the notebook's own metadata is never
trusted to say whose it is). The export is read with a safe YAML loader (yaml.safe_load's rules: plain data
only; Ruby tags read as plain data) and ids come only from its ``:sid:`` and ``:email:`` fields, never from free
text. One kernel per student and lesson (one_per_student).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import lessons as manifest
from ..errors import ConfigurationError
from .discover import canonical, lesson_from_name

__all__ = ["Submission", "read_gradescope_export", "collect", "one_per_student"]


@dataclass(frozen=True)
class Submission:
    """One notebook to grade: its file, a stable key (path relative to what was given), who submitted it."""

    path: Path
    key: str
    identity: tuple = ()
    #: the per-student folder it came from (the first folder under what the instructor named), "" for none
    folder: str = ""


def _yaml_loader():
    """yaml.SafeLoader that reads any tag (Gradescope writes Ruby ones) as the plain data under it."""
    try:
        import yaml
    except ImportError:  # jupyter_server (jupyterlab, the test extra) depends on it
        raise ConfigurationError(
            "reading a Gradescope export's submission_metadata.yml needs PyYAML: pip install pyyaml"
        ) from None

    class Loader(yaml.SafeLoader):
        pass

    def plain(loader, _suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("!", plain)
    Loader.add_multi_constructor("tag:", plain)
    return yaml, Loader


def _field(entry: dict, name: str):
    """entry[':name'] (Gradescope's Ruby symbol keys) or entry['name']."""
    for key in (f":{name}", name, f":{name}:"):
        if key in entry:
            return entry[key]
    return None


def _clean_id(text: str) -> str:
    """An id as read from an export: ASCII spaces around it dropped (no other characters: a no-break space or an
    ideographic space stays, so the id matches nobody) and lone surrogates made U+FFFD (it always encodes)."""
    return text.strip(" \t\r\n\f\v").encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def read_gradescope_export(path: Path) -> dict[str, tuple]:
    """{submission folder: (sid, email, ...) of each submitter} from a Gradescope export's submission_metadata.yml.

    Parsed with a safe YAML loader; ids are only the ``:sid:`` and ``:email:`` values of the
    ``:submitters:`` list (a string or a number each), so a name holding a newline and
    ``:sid: victim`` stays a name; only ASCII spaces are stripped (Roster.find matches ASCII ids only). A file that is not such YAML is refused with the reason.
    """
    yaml, loader = _yaml_loader()
    try:
        data = yaml.load(path.read_text(encoding="utf-8", errors="replace"), Loader=loader)  # noqa: S506 (safe)
    except (yaml.YAMLError, OSError, RecursionError) as exc:
        raise ConfigurationError(f"{path}: not a readable Gradescope submission_metadata.yml ({exc!s:.200})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: a Gradescope submission_metadata.yml maps submission folders to metadata")
    found: dict[str, tuple] = {}
    for folder, meta in data.items():
        ids: list[str] = []
        people = _field(meta, "submitters") if isinstance(meta, dict) else None
        for person in people if isinstance(people, list) else []:
            if not isinstance(person, dict):
                continue
            for name in ("sid", "email"):
                value = _field(person, name)
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    value = _clean_id(str(value))
                    if value:
                        ids.append(value)
        found[str(folder)] = tuple(ids)
    return found


def _key(path: str, base: str) -> str:
    """The notebook's row name: its path relative to `base`, as text that always encodes (a byte of the name that
    is not UTF-8 becomes \\xNN, a backslash \\\\: two different names never get one key)."""
    rel = Path(os.path.relpath(path, base)).as_posix().replace("\\", "\\\\")
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def collect(paths, export: bool = False) -> list[Submission]:
    """The notebooks under `paths` (files or folders, searched recursively; checkpoints skipped), sorted.

    Each is keyed by its path relative to the folder that holds everything given, so files of the
    same name in different folders are different rows; a notebook given twice is refused. Its student
    folder is the first folder under what the instructor named (the one folder given, else the common
    folder of all given): ``submitted`` or ``submitted/*`` both make ``alice`` of ``submitted/alice/x.ipynb``,
    and a folder inside a student's upload (``submitted/mallory/bob/``) never names anybody.
    export=True: the one folder given is a Gradescope export, and its submission_metadata.yml names the
    submitters of each ``submission_N`` folder; no other submission_metadata.yml is ever read (a student
    can upload one).
    """
    given = [os.path.abspath(p) for p in map(str, paths)]
    if not given:
        raise ConfigurationError("no notebooks to grade")
    base = os.path.commonpath([os.path.dirname(p) for p in given])
    single_folder = len(given) == 1 and os.path.isdir(given[0]) and not os.path.islink(given[0])
    anchor = given[0] if single_folder else os.path.commonpath(given) if len(given) > 1 else os.path.dirname(given[0])
    submitters: dict[str, tuple] = {}
    if export:
        if not single_folder:
            raise ConfigurationError(
                f"--export names one folder, a Gradescope export (given: {len(given)} path(s)); "
                "grade each export on its own"
            )
        metadata = Path(anchor) / "submission_metadata.yml"
        if not metadata.is_file() or metadata.is_symlink():
            raise ConfigurationError(f"{metadata}: no submission_metadata.yml, so {anchor} is not a Gradescope export")
        submitters = read_gradescope_export(metadata)
    out: list[Submission] = []

    def add(nb: Path) -> None:
        rel = Path(os.path.relpath(nb, anchor)).parts
        top = rel[0] if len(rel) > 1 and rel[0] not in ("..", ".") else ""
        identity = submitters.get(top, ()) if export else ((top,) if top else ())
        out.append(Submission(nb, _key(str(nb), base), identity, top))

    for path in given:
        root = Path(path)
        if not root.is_dir() or root.is_symlink():  # a file, or anything else: grade_notebook says what it is
            add(root)
            continue
        for nb in sorted(root.rglob("*.ipynb")):
            rel = nb.relative_to(root)
            if any(part.startswith(".") for part in rel.parts):
                continue  # .ipynb_checkpoints, hidden folders
            add(nb)
    if not out:
        raise ConfigurationError("no notebooks to grade")
    seen: dict[str, str] = {}
    for s in out:
        real = os.path.realpath(s.path) if s.path.is_file() and not s.path.is_symlink() else s.key
        for name in {s.key, real}:
            if name in seen:
                raise ConfigurationError(
                    f"{s.key}: given twice (also as {seen[name]}); give each notebook once, so it gets one row"
                )
            seen[name] = s.key
    return out


def one_per_student(submissions: list[Submission], lesson: str | None) -> dict[str, Submission]:
    """{key of each notebook not graded: the notebook graded in its place}: one kernel per student and lesson.

    Within a student folder, the notebooks of one lesson (--lesson, else the lesson their file name names; a
    name naming none is a group of its own) get one kernel: the lesson's exercise file name first, then a name
    naming the lesson, the shallowest, then by name (as the Gradescope autograder picks one per submission).
    A student's upload set therefore never multiplies the class run's kernels. Notebooks given outside a student
    folder are each graded.
    """
    groups: dict[tuple, list[Submission]] = {}
    for s in submissions:
        if s.folder:
            found = canonical(lesson) if lesson else lesson_from_name(s.path.name)
            groups.setdefault((s.folder, found), []).append(s)

    def rank(slug, s: Submission):
        entry = manifest.LESSONS.get(slug) if slug else None
        exercise = (getattr(entry, "exercise", None) or "") if entry is not None else ""
        tier = 0 if exercise and s.path.name == exercise else 1 if slug and lesson_from_name(s.path.name) == slug else 2
        return (tier, len(s.path.parts), s.key)

    ignored: dict[str, Submission] = {}
    for (_folder, slug), group in groups.items():
        chosen, *rest = sorted(group, key=lambda s: rank(slug, s))
        ignored.update((s.key, chosen) for s in rest)
    return ignored
