"""Per-student exercise variants, the instructor's side: the roster, seeds signed with a secret, the notebooks.

Each student's seed is HMAC-SHA256(instructor secret, "lesson|student id"), so a student cannot
choose an easy seed: the grader recomputes it from the roster and the secret and refuses a
notebook whose seed is not the one issued to its student. build_variants() writes one exercise
notebook per student and lesson with its seed in ``metadata["distlab"]["variant"]``, the
prompts rewritten with the student's numbers and a line that rebinds the lesson's questions
to them (distlab.lessons.variants.personal), and an optional release date before which
solution() is withheld. Self-study notebooks (no variant) grade exactly as before.

    >>> roster = Roster({"s1": {"id": "s1"}}, b"secret")
    >>> roster.seed("memory_wall", "s1") == roster.seed("memory_wall", "s1") != roster.seed("pipeline", "s1")
    True
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

import nbformat

from .._words import counted
from .. import lessons as manifest
from ..errors import ConfigurationError
from ..lessons.variants import lesson_variant, parse_release
from . import beneath
from .answers import not_attempted

__all__ = [
    "SECRET_ENV",
    "Roster",
    "folder_name",
    "read_secret",
    "load_roster",
    "personalise",
    "build_variants",
    "notebook_variant",
    "VariantPolicy",
    "students_of",
    "submitter",
]

SECRET_ENV = "DISTLAB_VARIANT_SECRET"
_ID_COLUMNS = ("id", "student_id", "sid", "student")
_SAFE = re.compile(r"[^A-Za-z0-9._@-]")


class Roster:
    """The students of a class ({id: csv row}) and the instructor's secret that signs their seeds."""

    def __init__(self, students: dict, secret: bytes):
        if not secret:
            raise ConfigurationError(f"variants need an instructor secret (--secret-file FILE or ${SECRET_ENV})")
        self.students, self.secret = dict(students), bytes(secret)
        for sid, row in self.students.items():
            for what, value in (("id", sid), ("email", row.get("email", ""))):
                if not _ascii_id(str(value or "x")):
                    raise ConfigurationError(
                        f"roster: student {ascii(sid)}'s {what} {ascii(value)} is not plain ASCII (letters, digits, "
                        "punctuation, spaces; no control characters): ids and e-mails are compared byte for byte"
                    )
        _refuse_shared_identities(self.students)
        self._by_email = {_plain(r.get("email", "")): sid for sid, r in self.students.items() if r.get("email")}
        self._by_folder = {folder_name(sid): sid for sid in self.students}

    def seed(self, lesson: str, student: str) -> str:
        """The seed issued to `student` for `lesson` (16 hex digits of an HMAC: not guessable without the secret)."""
        message = f"{manifest.lesson(lesson).slug}|{student}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()[:16]

    def find(self, *identities) -> str | None:
        """The roster id of the first identity (id or e-mail, as the LMS reports them) that is on the roster.

        Compared as ASCII only: ASCII spaces around it are dropped and an e-mail's ASCII letters lowered; an
        identity holding anything else (a KELVIN SIGN that str.lower() makes a "k", a no-break space) matches
        nobody, so it never becomes a classmate's.
        """
        for identity in identities:
            if not identity:
                continue
            identity = str(identity).strip(_ASCII_SPACE)
            if not _ascii_id(identity):
                continue
            if identity in self.students:
                return identity
            if _plain(identity) in self._by_email:
                return self._by_email[_plain(identity)]
            if identity in self._by_folder:  # the folder build_variants wrote for the student
                return self._by_folder[identity]
        return None


_ASCII_SPACE = " \t\r\n"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _plain(email) -> str:
    """An e-mail as compared: ASCII spaces stripped, ASCII letters lowered, nothing else changed (str.lower()
    makes the KELVIN SIGN a "k", str.strip() drops Unicode spaces: a look-alike would become a classmate's)."""
    return str(email).strip(_ASCII_SPACE).translate(_ASCII_LOWER)


def _refuse_shared_identities(students: dict) -> None:
    """ConfigurationError unless every identity names one student at most: Roster.find matches an id exactly, an
    e-mail with its ASCII letters lowered and a folder name (folder_name), so two students sharing any of these (an
    e-mail given twice, in any case; one's e-mail that is another's id; ids that differ only in case or make one
    folder) would make find pick one of them silently (red team round 23 02: the last row listed took the other's
    submissions). Compared lowered: ids differing only in case also share a folder on a case-insensitive disk."""
    owner: dict[str, tuple[str, str]] = {}
    for sid, row in students.items():
        email = row.get("email") or ""
        for what, name in (("id", sid), ("folder name", folder_name(sid)), ("e-mail", email)):
            key = _plain(name)
            if not key:
                continue
            other = owner.setdefault(key, (sid, what))
            if other[0] != sid:
                raise ConfigurationError(
                    f"roster: student {ascii(sid)}'s {what} {ascii(name)} is also student {ascii(other[0])}'s "
                    f"{other[1]} (compared without case): each id, e-mail and folder must name one student, or a "
                    "submission could be filed under the wrong one"
                )


def _ascii_id(text: str) -> bool:
    """Whether `text` is non-empty printable ASCII (no control characters, nothing a look-alike could hide in)."""
    return bool(text) and text.isascii() and text.isprintable()


def folder_name(student: str) -> str:
    """The folder build_variants writes a student's notebooks to: the id with unsafe characters as _."""
    return _SAFE.sub("_", student).lstrip(".") or "_"  # never "." or "..": one folder per student, inside OUT


def read_secret(path=None) -> bytes:
    """The instructor secret: the file's bytes (stripped), else the environment variable DISTLAB_VARIANT_SECRET."""
    if path:
        secret = Path(path).read_bytes().strip()
    else:
        secret = os.environ.get(SECRET_ENV, "").encode()
    if not secret:
        raise ConfigurationError(f"no instructor secret: pass --secret-file FILE or set ${SECRET_ENV}")
    return secret


def load_roster(path, secret: bytes) -> Roster:
    """Read a roster CSV: a column id (or student_id, sid, student), optional email and name."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = [{(k or "").strip().lower(): (v or "").strip() for k, v in row.items()} for row in csv.DictReader(f)]
    column = next((c for c in _ID_COLUMNS if rows and c in rows[0]), None)
    if column is None:
        raise ConfigurationError(
            f"{path}: the roster needs an id column ({', '.join(_ID_COLUMNS)}) and one row per student"
        )
    students = {}
    for row in rows:
        sid = row[column]
        if not sid:
            continue
        if sid in students:
            raise ConfigurationError(f"{path}: student {sid!r} is listed twice")
        students[sid] = {**row, "id": sid}
    return Roster(students, secret)


def _rebind_line(slug: str, names: list[str], seed: str, release) -> str:
    args = f"{slug!r}, {' '.join(names)!r}, seed={seed!r}" + (f", release={release.isoformat()!r}" if release else "")
    lhs = ", ".join(names) + ("," if len(names) == 1 else "")
    return (
        "\nfrom distlab.lessons.variants import personal  # your own numbers: this notebook is yours\n"
        f"{lhs} = personal({args})"
    )


def _rewrite_prompt(source: str, name: str, prompt: str) -> str:
    """The markdown paragraph that starts with **QN.** replaced by the variant's prompt."""
    tag = f"**{name.upper()}.**"
    lines = source.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(tag)), None)
    if start is None:
        return source
    stop = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[:start] + [f"{tag} {prompt}"] + lines[stop:])


def personalise(nb, slug: str, student: str, seed: str, release=None):
    """A copy of exercise notebook `nb` for one student: seed in its metadata, their numbers in prompts and checks."""
    nb = nbformat.from_dict(nb)
    try:
        release = parse_release(release)
    except ValueError:
        raise ConfigurationError(f"release date {release!r} is not an ISO date such as 2026-12-01") from None
    meta = nb.metadata.setdefault("distlab", {})
    meta["lesson"] = slug
    meta["variant"] = {"student": student, "seed": seed, **({"release": release.isoformat()} if release else {})}
    questions = lesson_variant(slug, seed)
    pattern = re.compile(rf"^from distlab\.lessons\.{slug} import ([\w ,]+)$", re.M)
    rebound = False
    for cell in nb.cells:
        if cell.cell_type == "code" and not rebound:
            match = pattern.search(cell.source)
            if match:
                names = [n.strip() for n in match.group(1).split(",") if n.strip() in questions]
                if names:
                    cell.source = cell.source.rstrip("\n") + _rebind_line(slug, names, seed, release)
                    rebound = True
        elif cell.cell_type == "markdown":
            for name, q in questions.items():
                if getattr(q, "variants", None):
                    cell.source = _rewrite_prompt(cell.source, name, q.prompt)
    if not rebound:
        raise ConfigurationError(
            f"lesson {slug}: no cell imports its questions (from distlab.lessons.{slug} "
            "import q1, ...), so the notebook cannot be personalised"
        )
    return nb


def build_variants(
    roster: Roster, exercises_dir="exercises", out_dir="variants", lessons=None, release=None
) -> list[Path]:
    """Write out_dir/<student id>/<exercise>.ipynb for every student and graded lesson (or `lessons`).

    One student's folder never stops another's notebook: what stands in the way of one (a link or a file in place
    of their folder, a folder under the exercise's name, an error of the file system there) is said, and every
    other student's notebook is written before ConfigurationError names them all (red team round 29 02: a link a
    student put in place of their folder, handed out in place, refused the whole run, and no student after them in
    the roster got a notebook)."""
    exercises = Path(exercises_dir)
    slugs = [manifest.lesson(n).slug for n in lessons] if lessons else list(manifest.graded())
    written: list[Path] = []
    failed: list[str] = []
    for slug in slugs:
        exercise = manifest.LESSONS[slug].exercise
        if exercise is None:
            raise ConfigurationError(f"lesson {slug!r} has no exercise notebook: it has no graded questions")
        source = exercises / exercise
        if not source.is_file():
            raise ConfigurationError(f"no exercise notebook at {source} (run: distlab exercises)")
        nb = nbformat.read(source, as_version=4)
        for sid in roster.students:
            personal = personalise(nb, slug, sid, roster.seed(slug, sid), release)
            try:
                written.append(_write_variant(Path(out_dir), folder_name(sid), source.name, personal))
            except ConfigurationError as exc:
                failed.append(str(exc))
            except OSError as exc:  # the student's folder: not writable, full, ...: said, never a traceback
                failed.append(f"{Path(out_dir) / folder_name(sid) / source.name}: {exc.strerror or exc}")
    if failed:
        shown = "; ".join(failed[:5]) + (f"; and {len(failed) - 5} more" if len(failed) > 5 else "")
        raise ConfigurationError(
            f"wrote {counted(len(written), 'notebook')}, but {len(failed)} could not be written: {shown}"
        )
    return written


def _write_variant(out: Path, folder: str, name: str, nb) -> Path:
    """Write `nb` as out/folder/name without following a link: the student's folder is made and opened from `out`
    with O_NOFOLLOW (a link in its place is refused), the notebook written to a new file of an unguessable name
    (O_EXCL) and renamed over `name`, which replaces whatever stands there (a link, a file) instead of writing
    through it. Red team round 26 04: a student whose variants folder was theirs to write (handed out in place) put a
    link there under the exercise's name, and the next `distlab exercises --variants` wrote over what it named (the
    instructor's notes, a classmate's work)."""
    out.mkdir(parents=True, exist_ok=True)
    top = beneath.open_folder(out)
    try:
        try:
            os.mkdir(folder, 0o755, dir_fd=top)
        except FileExistsError:
            pass
        try:
            fd = os.open(folder, beneath.FOLDER_FLAGS, dir_fd=top)
        except OSError as exc:
            if exc.errno not in beneath.ON_THE_WAY:
                raise
            raise ConfigurationError(f"{out / folder} is a link or a file, not a folder: remove it") from None
    finally:
        os.close(top)
    try:
        temporary = f".{name}.{secrets.token_hex(8)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            with os.fdopen(os.open(temporary, flags, 0o644, dir_fd=fd), "w", encoding="utf-8") as f:
                nbformat.write(nb, f)
            os.replace(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:  # red team round 27 02: never leave the temporary file behind in the student's folder
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=fd)
            raise
    except IsADirectoryError:  # a folder the student made under the exercise's name: a message, not a traceback
        raise ConfigurationError(f"{out / folder / name} is a folder, not a notebook: remove it") from None
    finally:
        os.close(fd)
    return out / folder / name


def notebook_variant(metadata) -> dict | None:
    """The ``distlab.variant`` block of a notebook's metadata ({student, seed, release}), or None."""
    meta = metadata.get("distlab") if isinstance(metadata, dict) else None
    found = meta.get("variant") if isinstance(meta, dict) else None
    if not isinstance(found, dict):
        return None
    # its strings as text that always encodes: a JSON "\ud800" escape becomes U+FFFD (it can still be refused)
    return {
        k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if isinstance(v, str) else v
        for k, v in found.items()
    }


#: how the problem of a submission whose ids name several roster students begins (graded for nobody): the grader's own
#: words, which class_results._student looks for at the start of a problem (a notebook's text never begins one: its
#: cells' problems begin "code cell"; red team round 12 class/02)
SEVERAL_STUDENTS = "refused: the submitter's ids ("


class VariantPolicy:
    """Which questions a notebook is graded against: its student's variant, checked against the roster.

    With a roster: the student is the one the platform names (``identity``: Gradescope's
    submitter, the export's submitter, the per-student folder), never the one the notebook names
    (a submission without an identity is refused); the seed is recomputed from the
    roster and the secret, and a notebook carrying any other seed is refused (no points). A
    student not on the roster is refused. Without a roster but with the instructor's secret
    (``--secret-file``: variants are in use), a notebook without a variant is refused (the public
    notebooks carry the default numbers) and a variant's seed must be the one issued to the student it
    names. Without either, a variant notebook is graded with the seed it carries, marked unverified
    (with ``unverified=False``, as ``distlab grade`` runs it: refused), and a notebook without a variant is graded as
    written. A group submission: see _group.
    """

    def __init__(self, roster: Roster | None = None, secret: bytes | None = None, unverified: bool = True):
        self.roster = roster
        self.signer = roster if roster is not None else Roster({}, secret) if secret else None
        #: False (distlab grade without a secret): a variant notebook is refused, never graded with the seed it claims
        self.unverified = unverified

    def __call__(self, grade, metadata, questions: dict, identity=None) -> dict | None:
        found = notebook_variant(metadata)
        seed = found.get("seed") if found else None
        if self.roster is None and self.signer is not None:
            return self._signed_only(grade, found, questions)
        if self.roster is None:
            if found is None:
                return questions
            if not isinstance(seed, str) or not seed:
                grade.problems.append("the notebook's variant has no seed; graded as written")
                return questions
            if len(seed) > 64 or not seed.isprintable() or not seed.isascii():
                grade.problems.append("the notebook's variant seed is not one distlab writes; graded as written")
                return questions
            if not self.unverified:  # its own seed would grade a forged or borrowed variant
                grade.problems.append(
                    "refused: the notebook carries a per-student variant and no instructor secret was given "
                    f"(--secret-file FILE or ${SECRET_ENV}, with --roster to check the submitter): its seed cannot "
                    "be checked, so it is not graded against the numbers it claims"
                )
                grade.questions = not_attempted(questions, "not graded (variant not verified)")
                return None
            grade.problems.append(
                f"variant seed {seed[:32]!r} not verified (grade with --roster and the instructor secret to check it)"
            )
            return lesson_variant(grade.lesson, seed)
        people = _people(identity)
        if len(people) > 1:  # a group submission: graded once, for the submitter whose variant it carries
            return self._group(grade, found, seed, questions, people)
        given = list(people[0]) if people else []
        named = _named(self.roster, given)
        if len(named) > 1:  # a sid and an e-mail of two classmates: never one of them picked silently
            ids = ", ".join(repr(str(one)[:80]) for one in named.values())
            grade.problems.append(
                f"{SEVERAL_STUDENTS}{ids}) name {len(named)} different students of the roster; "
                "graded against nobody's numbers: the instructor decides whose they are"
            )
            grade.questions = not_attempted(questions, "not graded (the submitter's ids name several students)")
            return None
        student = self.roster.find(*given) if given else None  # never the student the notebook claims to be
        if student is None:
            who = " / ".join(map(str, given))
            grade.problems.append(
                f"refused: student {str(who)[:80]!r} is not on the roster"
                if who
                else "refused: the submission names no student (grade per-student folders named by roster id, "
                "a Gradescope export, or give --submission-metadata); the notebook's own claim is not trusted"
            )
            grade.questions = not_attempted(questions, "not graded (student not on the roster)")
            return None
        issued = self.roster.seed(grade.lesson, student)
        grade.student = student
        if found is not None and seed != issued:
            grade.problems.append(
                f"refused: the notebook's variant seed is not the one issued to student "
                f"{student!r}; submit your own exercise notebook"
            )
            grade.questions = not_attempted(questions, "not graded (forged or foreign variant seed)")
            return None
        if found is None:
            grade.problems.append(
                f"graded against the numbers issued to student {student!r} (the notebook carries no variant)"
            )
        return lesson_variant(grade.lesson, issued)

    def _group(self, grade, found, seed, questions: dict, people: list[tuple]) -> dict | None:
        """A group submission (several submitters): graded once, for the submitter on the roster whose issued seed
        the notebook carries (never filed under the first one named); a submitter whose ids name two roster
        students, a notebook without a variant (whose numbers is not known) or a seed issued to none of them is
        refused; a submitter not on the roster is said; the problem names every submitter."""
        assert self.roster is not None
        found_ids = []
        for p in people:
            named = _named(self.roster, p)
            if len(named) > 1:  # as for one submitter: never one of two classmates picked silently
                ids = ", ".join(repr(str(one)[:80]) for one in named.values())
                return _refuse(
                    grade,
                    questions,
                    f"refused: in this group submission, one submitter's ids ({ids}) name {len(named)} different "
                    "students of the roster; graded against nobody's numbers: the instructor decides whose they are",
                    "not graded (a submitter's ids name several students)",
                )
            found_ids.append(next(iter(named), None))
        names = ", ".join(sid or repr(" / ".join(p)[:80]) for sid, p in zip(found_ids, people))
        on_roster = [sid for sid in found_ids if sid]
        for sid, p in zip(found_ids, people):
            if sid is None:
                grade.problems.append(f"group submission: submitter {' / '.join(p)[:80]!r} is not on the roster")
        if found is None and on_roster and not any(getattr(q, "variants", None) for q in questions.values()):
            grade.problems.append(f"a group submission of {names}: graded once (the lesson has no per-student numbers)")
            return questions
        if found is None:  # whose numbers? never the first one named (the submitter picks the group and its order)
            return _refuse(
                grade,
                questions,
                f"refused: a group submission of {names} whose notebook carries no variant: whose numbers it answers "
                "is not known, so it is graded against nobody's (submit one member's own exercise notebook; the "
                "instructor decides)",
                "not graded (a group notebook without a variant)",
            )
        mine = str(seed).encode("utf-8", "replace")  # compare_digest refuses str with non-ASCII characters
        matched = [sid for sid in on_roster if hmac.compare_digest(mine, self.roster.seed(grade.lesson, sid).encode())]
        if not matched:
            return _refuse(
                grade,
                questions,
                f"refused: a group submission of {names}, and the notebook's variant seed is not the one issued to "
                "any of them"
                if on_roster
                else f"refused: no submitter of this group submission ({names}) is on the roster",
                "not graded (no submitter's variant)",
            )
        student = grade.student = matched[0]
        grade.problems.append(f"a group submission of {names}: graded once, for {student!r} (the variant it carries)")
        return lesson_variant(grade.lesson, self.roster.seed(grade.lesson, student))

    def _signed_only(self, grade, found: dict | None, questions: dict) -> dict | None:
        """The secret without a roster: the variant must be one issued (its seed signs the student it names); the
        submitter is not checked (that needs the roster)."""
        assert self.signer is not None
        claimed = found.get("student") if found else None
        if found is None or not isinstance(claimed, str) or not _ascii_id(claimed) or len(claimed) > 200:
            grade.problems.append(
                "refused: per-student variants are graded (the instructor secret is given) and this notebook carries no variant of a "
                "student (the public and self-study notebooks have the default numbers); submit your own exercise "
                "notebook"
            )
            grade.questions = not_attempted(questions, "not graded (no per-student variant)")
            return None
        issued = self.signer.seed(grade.lesson, claimed)
        if found.get("seed") != issued:
            grade.problems.append(
                f"refused: the notebook's variant seed is not the one issued to student {claimed!r}; submit your own "
                "exercise notebook"
            )
            grade.questions = not_attempted(questions, "not graded (forged or foreign variant seed)")
            return None
        grade.problems.append(
            f"the variant of student {claimed!r} (its seed checked with the secret; who submitted it is checked "
            "only with --roster)"
        )
        return lesson_variant(grade.lesson, issued)


def students_of(roster: Roster, identity) -> set[str]:
    """The roster students a submission's identity names (each submitter of a group; every id of each)."""
    return {sid for person in _people(identity) for sid in _named(roster, person)}


def _named(roster: Roster, ids) -> dict:
    """{roster student: the first of `ids` that names them}, for each roster student one person's ids name."""
    named: dict = {}
    for one in ids:
        named.setdefault(roster.find(one), one)
    named.pop(None, None)
    return named


def _refuse(grade, questions: dict, problem: str, status: str) -> dict | None:
    """Refuse to grade: the problem said, every question not attempted with `status`; None (no questions)."""
    grade.problems.append(problem)
    grade.questions = not_attempted(questions, status)
    return None


def _people(identity) -> list[tuple]:
    """The submitters `identity` names, each a tuple of ids (an id, an e-mail): a string or a flat tuple of ids is
    one person; a tuple of tuples (a Gradescope export's group submission) is one person each."""
    if isinstance(identity, str):
        return [(identity,)]
    given = list(identity or ())
    if given and all(isinstance(p, (list, tuple)) for p in given):
        return [tuple(str(i) for i in p) for p in given if p]
    return [tuple(given)] if given else []


def submitter(path) -> tuple:
    """(sid, email) of the user in Gradescope's submission_metadata.json, the ones present; for a group
    submission one such tuple per user (VariantPolicy grades it for the one whose variant it carries); () if
    unreadable. Never Gradescope's own user "id" (a number of Gradescope's, not the course's): matched against the
    roster's ids it named whichever classmate's student number it happened to equal (red team round 23 05); an
    export is read the same way (class_submissions.read_gradescope_export: :sid: and :email: only)."""
    import json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        users = data.get("users") or []
    except (OSError, ValueError, AttributeError):
        return ()
    found = []
    for user in users if isinstance(users, list) else []:
        if isinstance(user, dict):
            ids = tuple(str(user[k]) for k in ("sid", "email") if user.get(k) not in (None, ""))
            if ids:
                found.append(ids)
    return found[0] if len(found) == 1 else tuple(found)
