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
only; Ruby tags read as plain data; every scalar the text written, never a YAML 1.1 number, boolean or date: an
unquoted 0123 is "0123", not 83; a key given twice refused) and ids come only from its ``:sid:`` and ``:email:``
fields, never from free text. One kernel per student and lesson (one_per_student).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .._words import counted
from .. import lessons as manifest
from ..errors import ConfigurationError
from . import beneath
from .discover import canonical, identify_lesson, lesson_from_name
from .submission import parse_sources, read_submission
from .variants import Roster, folder_name, students_of

__all__ = [
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_CANDIDATES",
    "Submission",
    "read_gradescope_export",
    "collect",
    "lesson_of",
    "one_per_student",
    "absent_students",
]

#: folders below what the instructor named that the walk enters (submitted/<student>/<16 levels>)
MAX_DEPTH = 16
#: files and folders the walk reads per student folder (and in the folder given itself)
MAX_ENTRIES = 20_000
#: a student's notebooks that become rows (the likeliest; the others are counted in one flag of that student)
MAX_CANDIDATES = 20


@dataclass(frozen=True)
class Submission:
    """One notebook to grade: its file, a stable key (path relative to what was given), who submitted it."""

    path: Path
    key: str
    identity: tuple = ()
    #: the per-student folder it came from (the first folder under what the instructor named), "" for none
    folder: str = ""
    #: what the walk could not search in that student's folder (too deep, unreadable, too many files), for its rows
    notes: tuple = ()
    #: False for the row of a student folder in which no notebook could be found (but the walk had notes)
    notebook: bool = True
    #: the folder the instructor named that holds it: below it no link is followed when the file is read
    #: (read_submission's root; "" for the file's own folder)
    root: str = ""


def _yaml_loader():
    """yaml.SafeLoader that reads any tag (Gradescope writes Ruby ones) as the plain data under it."""
    try:
        import yaml
    except ImportError:  # jupyter_server (jupyterlab, the test extra) depends on it
        raise ConfigurationError(
            "reading a Gradescope export's submission_metadata.yml needs PyYAML: pip install pyyaml"
        ) from None

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            """A mapping, refused (ConstructorError) when one of its own keys is given twice: YAML's loaders keep the
            last silently, so a doubled `submission_N:` or `:sid:` would make one of two readings win unseen."""
            seen = set()
            for key_node, _value in node.value if isinstance(node, yaml.MappingNode) else []:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"the key {str(key)[:80]!r} is given twice", key_node.start_mark
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    def text(loader, node):  # an id is the text written: 0123 stays "0123" (not 83), 1:30 not 90, yes not True
        return loader.construct_scalar(node)

    for tag in ("int", "float", "bool", "timestamp", "binary"):
        Loader.add_constructor(f"tag:yaml.org,2002:{tag}", text)

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
    """{submission folder: (sid, email) of its submitter, or ((sid, email), ...) one per submitter of a group
    submission} from a Gradescope export's submission_metadata.yml.

    Parsed with a safe YAML loader; ids are only the ``:sid:`` and ``:email:`` values of the
    ``:submitters:`` list (a string or a number each), so a name holding a newline and
    ``:sid: victim`` stays a name; only ASCII spaces are stripped (Roster.find matches ASCII ids only). A file that is not such YAML is refused with the reason.
    """
    yaml, loader = _yaml_loader()
    try:
        data = yaml.load(path.read_text(encoding="utf-8", errors="replace"), Loader=loader)  # noqa: S506 (safe)
    except (yaml.YAMLError, OSError, RecursionError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"{path}: not a readable Gradescope submission_metadata.yml ({exc!s:.200})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: a Gradescope submission_metadata.yml maps submission folders to metadata")
    found: dict[str, tuple] = {}
    for folder, meta in data.items():
        group: list[tuple] = []
        people = _field(meta, "submitters") if isinstance(meta, dict) else None
        for person in people if isinstance(people, list) else []:
            if not isinstance(person, dict):
                continue
            ids = []
            for name in ("sid", "email"):
                value = _field(person, name)
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    value = _clean_id(str(value))
                    if value:
                        ids.append(value)
            if ids:
                group.append(tuple(ids))
        # one submitter: their ids; a group: one tuple of ids per submitter (VariantPolicy grades it for the one
        # whose variant it carries, never for the first named)
        found[str(folder)] = group[0] if len(group) == 1 else tuple(group)
    return found


def _key(path: str, base: str) -> str:
    """The notebook's row name: its path relative to `base`, as text that always encodes (a byte of the name that
    is not UTF-8 becomes \\xNN, a backslash \\\\: two different names never get one key)."""
    rel = Path(os.path.relpath(path, base)).as_posix().replace("\\", "\\\\")
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def collect(paths, export: bool = False, lesson: str | None = None) -> list[Submission]:
    """The notebooks under `paths` (files or folders, searched recursively; checkpoints skipped), sorted.

    Each is keyed by its path relative to the folder that holds everything given, so files of the
    same name in different folders are different rows; a notebook given twice is refused. Its student
    folder is the first folder under what the instructor named (the one folder given, else the common
    folder of all given): ``submitted`` or ``submitted/*`` both make ``alice`` of ``submitted/alice/x.ipynb``,
    and a folder inside a student's upload (``submitted/mallory/bob/``) never names anybody.
    export=True: the one folder given is a Gradescope export, and its submission_metadata.yml names the
    submitters of each ``submission_N`` folder; no other submission_metadata.yml is ever read (a student
    can upload one).
    The walk is bounded (MAX_DEPTH, MAX_ENTRIES; errors noted per student folder, see _walk) and at most
    MAX_CANDIDATES notebooks of one student folder become rows (the likeliest for `lesson`); what was left out
    is in that folder's Submission.notes, and a folder with notes but no notebook gets a row of its own.
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
                f"--export names one folder, a Gradescope export (given: {counted(len(given), 'path')}); "
                "grade each export on its own"
            )
        metadata = Path(anchor) / "submission_metadata.yml"
        if not metadata.is_file() or metadata.is_symlink():
            raise ConfigurationError(f"{metadata}: no submission_metadata.yml, so {anchor} is not a Gradescope export")
        submitters = read_gradescope_export(metadata)
    out: list[Submission] = []

    def add(nb: Path, root: str = "") -> None:
        rel = Path(os.path.relpath(nb, anchor)).parts
        top = rel[0] if len(rel) > 1 and rel[0] not in ("..", ".") else ""
        identity = submitters.get(top, ()) if export else ((top,) if top else ())
        out.append(Submission(nb, _key(str(nb), base), identity, top, root=root))

    notes: dict[str, Counter] = {}
    seen: dict[str, Counter] = {}  # per student folder: what the walk saw besides notebooks (hidden, other files)
    for path in given:
        if not os.path.isdir(path) or os.path.islink(path):  # a file, or anything else: grade_notebook says what
            add(Path(path))
            continue
        for nb in _walk(path, anchor, notes, seen):
            add(Path(nb), path)  # found below the folder given: read without following a link below it
    out = _bounded(out, notes, lesson)
    _note_empty_folders(out, notes, seen)
    if not out and not notes:
        raise ConfigurationError("no notebooks to grade")
    out = _with_notes(out, notes, anchor, base, submitters if export else None)
    twice: dict[str, str] = {}
    for s in out:
        for name in {s.key, _where(s) if s.notebook else s.key}:
            if name in twice:
                raise ConfigurationError(
                    f"{s.key}: given twice (also as {twice[name]}); give each notebook once, so it gets one row"
                )
            twice[name] = s.key
    return out


#: what a student folder without a notebook holds, by kind: (singular, plural) of the count's words
SEEN = {
    "hidden": ("hidden file or folder, not searched", "hidden files or folders, not searched"),
    "other": ("other file", "other files"),
}


def _note_empty_folders(out: list[Submission], notes: dict[str, Counter], seen: dict[str, Counter]) -> None:
    """A note for each student folder the walk entered that holds no notebook (an empty upload, a notebook only
    under a hidden name), saying what was seen there: the folder then gets a row of its own (_with_notes)."""
    have = {s.folder for s in out}
    for top, what in seen.items():
        if top and top not in have and top not in notes:
            found = ", ".join(counted(n, *SEEN[w]) for w, n in sorted(what.items()) if n) or "nothing"
            notes[top] = Counter({f"no notebook (.ipynb) found in this folder; seen: {found}": 1})


def _where(s: Submission) -> str:
    """Where a notebook lies, to tell one given twice: the real path of the folder the instructor named (links in the
    instructor's own path resolved), then the names below it as the walk found them, never resolved: a link a student
    puts in their folder cannot make two notebooks one (red team round 26 01: swapped in after the walk, it made
    mallory's notebook "given twice" with bob's, and the whole class run refused to start)."""
    top = s.root or os.path.dirname(os.path.abspath(s.path))
    return os.path.join(os.path.realpath(top), *beneath.parts_below(s.path, top))


def _top(folder: str, anchor: str) -> str:
    """The student folder `folder` lies in: the first part of its path under `anchor` ("" for anchor itself)."""
    rel = os.path.relpath(folder, anchor)
    return "" if rel in (".", "") or rel.startswith("..") else rel.split(os.sep, 1)[0]


def _walk(root: str, anchor: str, notes: dict[str, Counter], seen: dict[str, Counter]) -> list[str]:
    """The *.ipynb files under `root` (any case of the extension: .IPYNB too; no hidden file or folder, no link
    followed), read iteratively with os.scandir: at most MAX_DEPTH folders deep and MAX_ENTRIES entries per student
    folder. Whatever is not searched (too deep, unreadable, past the budget) is counted in notes[student folder],
    never raised; seen[student folder] counts what else was there (hidden entries, other files) for every student
    folder entered, an empty one too. Each folder is listed through a descriptor opened from `root` down, every
    folder below it with O_NOFOLLOW (beneath.open_folder): one swapped for a link since it was seen is not listed."""
    found: list[str] = []
    spent: Counter = Counter()
    stack: list[tuple[str, tuple, int]] = [(root, (), 0)]
    while stack:
        folder, parts, depth = stack.pop()
        top = _top(folder, anchor)
        seen.setdefault(top, Counter())
        try:
            fd = beneath.open_folder(root, parts, beneath.LIST_FLAGS)
            try:
                with os.scandir(fd) as entries:
                    for name, is_dir in _entries(entries, top, spent, notes, seen[top]):
                        if is_dir and depth + 1 > MAX_DEPTH:
                            notes.setdefault(top, Counter())[
                                f"a folder deeper than {MAX_DEPTH} levels was not searched"
                            ] += 1
                        elif is_dir:
                            stack.append((os.path.join(folder, name), (*parts, name), depth + 1))
                        else:
                            found.append(os.path.join(folder, name))
            finally:
                os.close(fd)
        except OSError as exc:  # a name too long, a folder that cannot be read: noted for that student only
            why = "a link or a file now stands in its place" if exc.errno in beneath.ON_THE_WAY else exc.strerror
            notes.setdefault(top, Counter())[f"a folder could not be read ({why or exc})"] += 1
    return sorted(found)


def _entries(entries, top: str, spent: Counter, notes: dict[str, Counter], what: Counter):
    """(name, is a folder) of each folder and *.ipynb file among a folder's `entries`, within the student's budget of
    MAX_ENTRIES (spent[top]); hidden and other entries are counted in `what`, what cannot be read in notes[top]."""
    for entry in entries:
        spent[top] += 1
        if spent[top] > MAX_ENTRIES:
            notes.setdefault(top, Counter())[
                f"more than {MAX_ENTRIES:,} files and folders: the rest of them was not searched"
            ] = 1
            return
        if entry.name.startswith("."):
            what["hidden"] += 1  # .ipynb_checkpoints, .x.ipynb
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            notes.setdefault(top, Counter())[f"an entry could not be read ({exc.strerror or exc})"] += 1
            continue
        if is_dir or entry.name.lower().endswith(".ipynb"):
            yield entry.name, is_dir
        else:
            what["other"] += 1


def _likely(s: Submission, lesson: str | None = None) -> tuple:
    """How likely `s` is the notebook to grade, lowest first: the exercise file name (of `lesson`, else of any
    lesson), then a name naming that lesson (any lesson), the shallowest, then by key."""
    slug = canonical(lesson) if lesson else lesson_from_name(s.path.name)
    entry = manifest.LESSONS.get(slug) if slug else None
    exercise = (getattr(entry, "exercise", None) or "") if entry is not None else ""
    tier = 0 if exercise and s.path.name == exercise else 1 if slug and lesson_from_name(s.path.name) == slug else 2
    return (tier, len(s.path.parts), s.key)


def _bounded(out: list[Submission], notes: dict[str, Counter], lesson: str | None) -> list[Submission]:
    """At most MAX_CANDIDATES notebooks per student folder (the likeliest); the others are counted in one note."""
    per: dict[str, list[Submission]] = {}
    for s in out:
        per.setdefault(s.folder, []).append(s)
    kept = []
    for folder, group in per.items():
        if folder and len(group) > MAX_CANDIDATES:
            group = sorted(group, key=lambda s: _likely(s, lesson))
            notes.setdefault(folder, Counter())[
                f"{counted(len(group) - MAX_CANDIDATES, 'more notebook')} in this upload were not considered (only the "
                f"{MAX_CANDIDATES} likeliest are: an exercise file name, a name naming a lesson, the shallowest)"
            ] = 1
            group = group[:MAX_CANDIDATES]
        kept += group
    return sorted(kept, key=lambda s: s.path)


def _with_notes(out, notes, anchor: str, base: str, submitters) -> list[Submission]:
    """`out` with each student folder's notes on its rows; a folder with notes but no notebook gets a row of its
    own (notebook=False), so what could not be searched is always said."""
    text = {top: tuple(f"{m} ({n} times)" if n > 1 else m for m, n in c.items()) for top, c in notes.items()}
    with_notes = [dataclasses.replace(s, notes=text.get(s.folder, ())) for s in out]
    have = {s.folder for s in out}
    for top in sorted(set(text) - have):
        path = os.path.join(anchor, top) if top else anchor
        identity = (submitters.get(top, ()) if submitters is not None else (top,)) if top else ()
        with_notes.append(Submission(Path(path), _key(path, base) + "/", identity, top, text[top], False))
    return with_notes


def lesson_of(s: Submission) -> tuple[str | None, str | None]:
    """(the lesson notebook `s` is, as grade_notebook finds it: metadata, else file name, else imports; the lesson
    its file name names). The file is read (read_submission) and parsed as data only; unreadable: its name's."""
    return _read_lesson(s)[:2]


def _read_lesson(s: Submission) -> tuple[str | None, str | None, bool, str]:
    """lesson_of's two lessons, whether `s` can be graded at all (a regular file that parses as a notebook) and the
    digest of the bytes read (digest_of)."""
    named = lesson_from_name(s.path.name)
    data = read_submission(s.path, [], root=s.root or None)
    parsed = None if data is None else parse_sources(data, [])
    if parsed is None:
        return named, named, False, digest_of(data)
    return identify_lesson(parsed[0], s.path.name, parsed[1])[0], named, True, digest_of(data)


def digest_of(data: bytes | None) -> str:
    """SHA-256 of the bytes read, or "not-a-file" for a file read_submission refused (journal.NOT_A_FILE)."""
    return "not-a-file" if data is None else hashlib.sha256(data).hexdigest()


def _mismatch(found: str | None, named: str | None, lesson: str | None) -> str:
    """Why a notebook is not run (its lesson is not the one it is graded as, or its name says another), or ""."""
    if lesson and found is not None and found != canonical(lesson):
        return f"not run: this notebook is lesson {found!r}, not {canonical(lesson)!r} (--lesson); no points here"
    if not lesson and found is not None and named is not None and found != named:
        return (
            f"not run: its file name names lesson {named!r} but the notebook is lesson {found!r} (its "
            "metadata); one kernel per student and lesson, so a copy under another lesson's name is not graded"
        )
    return ""


def one_per_student(
    submissions: list[Submission], lesson: str | None, digests: dict[str, str] | None = None
) -> dict[str, Submission | str]:
    """{key of each notebook not graded: the notebook graded in its place, or why it is not run}: one kernel per
    student and lesson.

    Within a student folder each notebook's lesson is the one it really is (lesson_of: --lesson, else its
    metadata, file name or imports, as grade_notebook decides); a notebook whose lesson is not --lesson, or whose
    file name names another lesson than its metadata, is not run (a row saying why). The notebooks of one lesson
    get one kernel: the lesson's exercise file name first, then a name naming the lesson, the shallowest, then by
    name (as the Gradescope autograder picks one per submission), a notebook that can be graded always before one
    that cannot (a link, a FIFO, an empty or cut-short file: red team round 17 04, a FIFO under the exercise's
    name was chosen and the student's readable notebook not run). A student's upload set therefore never
    multiplies the class run's kernels. Notebooks given outside a student folder are each graded.
    digests: filled with {key: digest_of the bytes its lesson was read from} for every notebook of a student folder
    (the class runner grades one only if it still holds those bytes: red team round 28 01).
    """
    groups: dict[tuple, list[Submission]] = {}
    ignored: dict[str, Submission | str] = {}
    ungradable: set[str] = set()
    for s in submissions:
        if s.folder and s.notebook:
            found, named, gradable, digest = _read_lesson(s)
            if digests is not None:
                digests[s.key] = digest
            if not gradable:
                ungradable.add(s.key)
            why = _mismatch(found, named, lesson)
            if why:
                ignored[s.key] = why
            else:
                groups.setdefault((s.folder, canonical(lesson) if lesson else found), []).append(s)
    for (_folder, slug), group in groups.items():
        chosen, *rest = sorted(group, key=lambda s: (s.key in ungradable, _likely(s, slug)))
        ignored.update((s.key, chosen) for s in rest)
    return ignored


def absent_students(roster: Roster, submissions: list[Submission]) -> list[Submission]:
    """A row (notebook=False) for each roster student whom no submission names: every roster student gets a row,
    so one whose upload held no gradeable notebook (or who submitted nothing) is never left out of the class."""
    named: set[str] = set()
    for s in submissions:
        named |= students_of(roster, s.identity)
    return [
        Submission(
            Path(f"(no submission of {folder_name(sid)})"),
            f"(roster) {sid}",
            (sid,),
            "",
            ("no notebook found for this roster student: no folder or submission of theirs was given",),
            False,
        )
        for sid in roster.students
        if sid not in named
    ]
