"""Container mode (issue 28): the generated Gradescope autograder, run against a fake /autograder tree.

run_autograder runs here as root, the notebook as an unprivileged id (class_helpers.KERNEL_ID) without network,
exactly as it does in Gradescope's container; each attack below succeeded on the autograder before the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from class_helpers import KERNEL_ID, ROOT, SECRET, autograder_env, needs_unprivileged_python, solve, write_roster
from distlab.grading import gradescope, upload, variants
from distlab.grading.answers import OpaqueAnswer, decode, opaque
from distlab.grading.report import FEEDBACK_CHARS, GradeReport, NotebookGrade, QuestionGrade
from distlab.lessons.variants import lesson_variant


def _autograder_tree(base: Path, timeout: float = 120):
    """(root, roster): a fake /autograder tree under `base` as Gradescope lays it out (memory_wall, `timeout` s)."""
    roster_csv, secret = write_roster(base, ids=("alice", "bob"))
    zip_path = gradescope.build_autograder(
        "memory_wall", base / "autograder.zip", timeout=timeout, roster=roster_csv, secret_file=secret
    )
    root = base / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"email": "bob@uni.example"}]}))
    roster = variants.load_roster(roster_csv, SECRET)
    variants.build_variants(roster, ROOT / "exercises", base / "v", ["memory_wall"])
    return root, roster


@pytest.fixture
def autograder():
    """(root, roster): a fake /autograder tree as Gradescope lays it out, world-traversable as /autograder is."""
    base = Path(tempfile.mkdtemp(prefix="distlab-autograder-test-"))
    os.chmod(base, 0o755)
    try:
        yield _autograder_tree(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(root, **env):
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env=autograder_env(root, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text()), done.stdout + done.stderr


def _bobs(root, roster, wrong=()):
    """Bob's own variant notebook, solved with his numbers (but `wrong`)."""
    return solve(
        root.parent / "v" / "bob" / "01_memory_wall.ipynb", "memory_wall", roster.seed("memory_wall", "bob"), wrong
    )


def _append_cell(path: Path, source: str) -> Path:
    nb = json.loads(path.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source})
    path.write_text(json.dumps(nb))
    return path


def _processes_of(uid: int) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                found.append(entry)
        except OSError:
            pass
    return found


ATTACK = """
import os, pathlib, socket
root = pathlib.Path({root!r})
got = []
for name in ("source/variant_secret", "source/roster.csv", "submission_metadata.json", "source/run_autograder"):
    try:
        got.append(name + "=" + (root / name).read_text())
    except OSError:
        pass
for name in ("results/results.json", "results/extra.json"):
    try:
        (root / name).write_text('{{"score": 100, "output": "forged", "tests": []}}')
        got.append("wrote " + name)
    except OSError:
        pass
if os.geteuid() == 0:
    got.append("root")
if os.environ.get("DISTLAB_VARIANT_SECRET"):
    got.append("env=" + os.environ["DISTLAB_VARIANT_SECRET"])
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    got.append("network")
except OSError:
    pass
if got:
    answer_q1 = " | ".join(got)  # echoed in the feedback if anything leaked
try:
    import subprocess
    subprocess.Popen(["sleep", "600"], start_new_session=True)  # left running on purpose
except Exception:
    pass
"""


@needs_unprivileged_python
def test_the_notebook_runs_unprivileged_reads_no_secret_writes_no_results_and_has_no_network(shared_upload):
    result, log = shared_upload["result"], shared_upload["log"]
    assert shared_upload["returncode"] == 0, shared_upload["stderr"]
    # every attack failed, so bob's own answers stand: full marks, and q1 is his number, not a leak
    assert result["score"] == 8.0, result
    text = json.dumps(result) + log
    assert SECRET.decode() not in text and "alice@uni.example" not in text and "forged" not in text
    assert not shared_upload["extra_results"]
    assert shared_upload["kernel_processes"] == []  # the sleep it left behind was ended


@needs_unprivileged_python
def test_two_uploaded_halves_do_not_add_up_to_full_marks(autograder):
    root, roster = autograder
    first = _bobs(root, roster, wrong=("q5", "q6", "q7", "q8"))
    shutil.copy(first, root / "submission" / "01_memory_wall.ipynb")
    second = _bobs(root, roster, wrong=("q1", "q2", "q3", "q4"))
    shutil.copy(second, root / "submission" / "01_memory_wall (1).ipynb")
    result, _ = _run(root)
    assert result["score"] == 4.0 and len(result["tests"]) == 8  # one notebook: at most the lesson's 8
    assert "ignored: 01_memory_wall (1).ipynb" in result["output"]


def test_the_lessons_notebook_is_picked_by_name(tmp_path):
    for name in ("notes.ipynb", "01_memory_wall (1).ipynb", "01_memory_wall.ipynb", "deep/01_memory_wall.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    (tmp_path / "a" / "01_memory_wall.ipynb").mkdir(parents=True)  # a folder named like the notebook: skipped
    chosen, ignored, complete = gradescope.pick_notebook([tmp_path], "memory_wall")
    assert complete
    assert chosen == tmp_path / "01_memory_wall.ipynb"
    assert [p.relative_to(tmp_path).as_posix() for p in ignored] == [
        "deep/01_memory_wall.ipynb",
        "01_memory_wall (1).ipynb",
        "notes.ipynb",
    ]
    (tmp_path / "01_memory_wall.ipynb").unlink()
    (tmp_path / "deep" / "01_memory_wall.ipynb").unlink()
    assert gradescope.pick_notebook([tmp_path], "memory_wall")[0] == tmp_path / "01_memory_wall (1).ipynb"
    assert gradescope.pick_notebook([tmp_path / "deep"], "memory_wall") == (None, [], True)


def _deep(folder: Path, depth: int) -> Path:
    """A chain of `depth` nested folders d/d/d/... under `folder` (made one at a time: no recursion), its bottom."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            fd, up = os.open("d", os.O_RDONLY, dir_fd=fd), fd
            os.close(up)
    finally:
        os.close(fd)
    return folder.joinpath(*["d"] * depth)


def test_an_uploads_shape_cannot_crash_or_stall_the_pick(tmp_path, monkeypatch):
    # the attacks (red team 11, 18): a chain of 1,200 nested folders next to the notebook made pick_notebook's
    # rglob raise RecursionError (the run crashed and told the student to upload the notebook they had uploaded);
    # 300,000 decoy notebooks were all listed and sorted (minutes, 230 MB). The walk is iterative and bounded:
    # PICK_DEPTH folders deep, PICK_ENTRIES entries read (lowered here to 50 so that 200 decoys exceed it)
    (tmp_path / "01_memory_wall.ipynb").write_text("{}")
    (_deep(tmp_path, 1_200) / "x.ipynb").write_text("{}")
    try:
        chosen, ignored, complete = gradescope.pick_notebook([tmp_path], "memory_wall")
    finally:
        subprocess.run(["rm", "-rf", str(tmp_path / "d")], check=True)  # shutil.rmtree recurses
    assert chosen == tmp_path / "01_memory_wall.ipynb" and ignored == [] and not complete  # the deep one unread
    many = tmp_path / "many"
    many.mkdir()
    for i in range(200):
        (many / f"n{i:03d}.ipynb").write_text("{}")
    monkeypatch.setattr(upload, "PICK_ENTRIES", 50)  # where the walk reads it (gradescope re-exports it)
    chosen, ignored, complete = gradescope.pick_notebook([tmp_path], "memory_wall")
    assert chosen == tmp_path / "01_memory_wall.ipynb" and len(ignored) < 50 and not complete


@needs_unprivileged_python
def test_an_uploads_shape_does_not_keep_its_notebook_from_being_graded(shared_upload):
    # the same attacks through run_autograder: root copies at most PICK_COPIES notebooks (the lesson's first),
    # PICK_DEPTH folders deep, instead of the whole upload (cp -R), and grades the lesson's notebook
    result = shared_upload["result"]
    assert shared_upload["returncode"] == 0, shared_upload["stderr"]
    assert _failed_but_q1(result) == [], result  # q1 is the shared ATTACK's (its own test reads it)
    # the ignored ones listed: ten by name, then how many more of the copied ones (100 copied: 1 graded, 99 not)
    assert "n009.ipynb and 89 more" in result["output"], result["output"]


def test_the_generated_scripts_drop_privileges_and_keep_the_secret_root_only():
    script = gradescope.run_script("memory_wall", 300, 60, variants=True)
    setup = gradescope.setup_script("distlab")
    assert "setpriv --reuid=" in script and "env -i" in script and 'DISTLAB_KERNEL_IDS="$KUID:$KGID"' in script
    assert "unshare --net" in script and "kill -KILL -1" in script
    # phase 1 is killed at its time limit, in its own pid and mount namespaces with private temporary folders
    assert "timeout -s KILL 480 " in script and "--pid --fork --kill-child --mount" in script  # 300 s + 180
    assert "for d in /tmp /var/tmp /dev/shm" in script and "mount -t tmpfs -o size=512m" in script
    assert "env -u DISTLAB_VARIANT_SECRET" in script and "--answers-from" in script and "--one-notebook" in script
    assert 'chmod -R go-rwx "$SOURCE"' in script
    assert "useradd --system" in setup and "chmod -R go-rwx /autograder/source" in setup
    assert "chmod 700 \"$(/opt/distlab-venv/bin/python -I -c 'import distlab, os" in setup  # the answer key: root's


def test_the_kernel_user_is_never_root(monkeypatch):
    from distlab.grading.kernel import container_kernel_ids

    monkeypatch.delenv("DISTLAB_KERNEL_IDS", raising=False)
    assert container_kernel_ids() is None  # not set: the kernel stays the grader's user (distlab grade by hand)
    for bad in ("0:0", "61234:0", "0:61234", "abc", "61234"):
        monkeypatch.setenv("DISTLAB_KERNEL_IDS", bad)
        with pytest.raises(RuntimeError, match="DISTLAB_KERNEL_IDS"):
            container_kernel_ids()
    monkeypatch.setenv("DISTLAB_KERNEL_IDS", "61234:61235")
    if os.geteuid() == 0:
        assert container_kernel_ids() == (61234, 61235)
    else:
        with pytest.raises(RuntimeError):  # only root can start the kernel as another user
            container_kernel_ids()


def test_without_the_kernel_user_nothing_runs_as_root(tmp_path):
    zip_path = gradescope.build_autograder("memory_wall", tmp_path / "autograder.zip", timeout=60)
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    (root / "submission" / "01_memory_wall.ipynb").write_text("{}")
    env = autograder_env(root, DISTLAB_KERNEL_USER="no-such-user-distlab")
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True)
    result = json.loads((root / "results" / "results.json").read_text())
    assert done.returncode == 0 and result["score"] == 0 and "no user no-such-user-distlab" in done.stderr
    for ids in ("0:0", "61234:0"):
        env = autograder_env(root, DISTLAB_KERNEL_USER=ids)
        done = subprocess.run(
            ["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True
        )
        assert "refusing to run the notebook as root" in done.stderr
        assert json.loads((root / "results" / "results.json").read_text())["score"] == 0


# ---- what crosses from the unprivileged phase to root's -------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, ..., True, 3, -2.5, float("inf"), "12 GB", [1, (2, 3)], {"a": {1, 2}}, frozenset({4}), opaque("list")],
)
def test_answers_cross_as_plain_data_and_decode_as_the_kernels_own(value):
    back = decode(json.loads(json.dumps(gradescope.encode(value))))
    if isinstance(value, OpaqueAnswer):
        assert type(back).__name__ == "list" and repr(back) == repr(value)
    else:
        assert back == value and type(back) is type(value)


def test_an_array_answer_crosses_too():
    back = decode(gradescope.encode(np.array([1.5, 2.5])))
    assert isinstance(back, np.ndarray) and back.tolist() == [1.5, 2.5]


def test_root_reads_the_answers_file_as_untrusted_data(tmp_path):
    questions = lesson_variant("memory_wall", None)
    secret = tmp_path / "variant_secret"
    secret.write_bytes(SECRET)
    link = tmp_path / "answers.json"
    link.symlink_to(secret)  # planted by the unprivileged phase: never followed
    problems: list[str] = []
    assert gradescope.AnswerReader(link)(b"", [], questions, problems) == {}
    assert problems and SECRET.decode() not in " ".join(problems)
    answers = tmp_path / "real.json"
    answers.write_text(
        json.dumps(
            {
                "answers": {"answer_q1": {"t": "int", "v": "16"}, "answer_nope": {"t": "str", "v": "x"}},
                "problems": ["y" * 10_000] * 100,
            }
        )
    )
    problems = []
    read = gradescope.AnswerReader(answers)(b"", [], questions, problems)
    assert read == {"answer_q1": 16}  # only the lesson's answer names
    assert len(problems) == 50 and all(len(p) < 500 for p in problems)


# ---- feedback ---------------------------------------------------------------------------------------------------


def test_feedback_echoes_only_a_short_escaped_excerpt_of_student_text():
    # the attack: a check that quotes the answer (a choice, a unit) echoed up to 10,000 characters of it, with
    # terminal escapes and newlines, into the student-visible output; and 20,000 cells' problems
    echoed = "not yet, because " + repr("\x1b[2J\nscore: 8/8 for alice\n" + "A" * 10_000) + " is not one of: a, b"
    grade = QuestionGrade("q1", "incorrect", 0.0, 1.0, echoed, "p")
    assert len(grade.feedback) <= FEEDBACK_CHARS + 40 and grade.feedback.endswith("more characters)")
    out = GradeReport([NotebookGrade("x.ipynb", "memory_wall", [grade], ["B\x1b" * 5_000] * 80)]).to_gradescope()
    assert "\x1b" not in json.dumps(out, ensure_ascii=False) and "\n" not in out["tests"][0]["output"]
    assert len(out["output"]) < 60 * 500 and "and 30 more problems" in out["output"]
    assert out["stdout_visibility"] == "hidden"  # the autograder's log is the instructor's, never the student's


# ---- nothing of the upload runs as root ------------------------------------------------------------------------

#: files an upload set may carry to get code run by root's Python or shell (each, if run, leaves a mark)
SHADOWS = {
    "distlab/__init__.py": "",
    "distlab/__main__.py": "{mark}('distlab')",
    "sitecustomize.py": "{mark}('sitecustomize')",
    "usercustomize.py": "{mark}('usercustomize')",
    "runpy.py": "{mark}('runpy')",
    "json.py": "{mark}('json')",
    "argparse.py": "{mark}('argparse')",
    "zz-upload.pth": "import os; {mark}('pth')",
}
FAKE_PYTHON = "#!/bin/sh\ntouch {folder}/$(basename $0)\n"


def _plant_shadows(root: Path) -> Path:
    """SHADOWS and FAKE_PYTHON's programs in the upload, each leaving a mark in the returned folder if run."""
    marks = root.parent / "marks"
    marks.mkdir()
    mark = f"(lambda n: open({str(marks)!r} + '/' + n, 'w').close())"
    for name, text in SHADOWS.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text.format(mark=mark) + "\n")
    for name in ("python", "python3", "bash", "setpriv", "unshare", "env", "timeout"):
        (root / "submission" / name).write_text(FAKE_PYTHON.format(folder=marks))
        (root / "submission" / name).chmod(0o755)
    return marks


def _run_from_the_upload(root: Path, prefix: list, **env) -> tuple[dict, subprocess.CompletedProcess]:
    """run_autograder started from the upload's folder (prefix: what runs it); (results.json, how it ended)."""
    done = subprocess.run(
        [*prefix, "bash", str(root / "source" / "run_autograder")],
        env=autograder_env(root, **env),
        cwd=root / "submission",  # even started from the upload
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads((root / "results" / "results.json").read_text()), done


def _failed_but_q1(result: dict) -> list[str]:
    """The questions of bob's solved notebook not graded correct, q1 aside (ATTACK echoes a leak there): [] when
    the other seven passed and all eight were graded."""
    tests = result.get("tests", [])
    if len(tests) != 8:
        return [f"{len(tests)} questions graded, not 8"]
    return [
        t["name"][:40] + ": " + t["output"]
        for t in tests
        if t["status"] != "passed" and not t["name"].startswith("q1:")
    ]


@pytest.fixture(scope="module")
def shared_upload():
    """One upload carrying three independent attacks, graded once (namespaces); what the tests inspect.

    Bob's solved notebook with ATTACK appended (secret, roster, results, root, network: each refused leaves his
    answers and the score alone), the upload's shape (a chain of 1,200 folders and 150 decoy notebooks: only
    the notebooks are copied, the lesson's graded) and SHADOWS with fake programs (nothing of the upload runs as
    root: no mark), run with the secret in root's environment from the upload's folder. None changes what
    another sees: the decoys and shadows are files of the upload that the notebook never reads, the attack runs
    inside the notebook, and none adds a notebook to the copied hundred; a leak shows in q1 only, which the other
    two tests leave to the attack's own test. Kept apart: the upload of two halves
    (its own notebooks) and the run without namespaces."""
    base = Path(tempfile.mkdtemp(prefix="distlab-autograder-test-"))
    os.chmod(base, 0o755)
    listener = socket.socket()
    try:
        root, roster = _autograder_tree(base)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        notebook = _append_cell(_bobs(root, roster), ATTACK.format(root=str(root), port=listener.getsockname()[1]))
        shutil.copy(notebook, root / "submission" / "01_memory_wall.ipynb")
        (_deep(root / "submission", 1_200) / "x.ipynb").write_text("{}")
        for i in range(150):
            (root / "submission" / f"n{i:03d}.ipynb").write_text("{}")
        marks = _plant_shadows(root)
        try:
            result, done = _run_from_the_upload(root, [], DISTLAB_VARIANT_SECRET=SECRET.decode())
        finally:
            listener.close()
            subprocess.run(["rm", "-rf", str(root / "submission" / "d")], check=True)  # shutil.rmtree recurses
        yield {
            "result": result,
            "returncode": done.returncode,
            "log": done.stdout + done.stderr,
            "stderr": done.stderr,
            "marks": sorted(os.listdir(marks)),
            "extra_results": (root / "results" / "extra.json").exists(),
            "kernel_processes": _processes_of(int(KERNEL_ID.split(":")[0])),
        }
    finally:
        listener.close()
        shutil.rmtree(base, ignore_errors=True)


@needs_unprivileged_python
@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
def test_nothing_in_the_upload_runs_as_root(request, namespaces):
    # the attack (red team 04 and 16): run_autograder's phase 1 ran `cd <root's copy of the upload>` and then
    # `python -m distlab` as root, so the upload's distlab/__main__.py ran as uid 0 (secret, roster, full marks);
    # a container without namespaces (Gradescope's Docker: no CAP_SYS_ADMIN) changed nothing. With namespaces the
    # upload is shared_upload's (with its other attacks); without, an upload of its own
    if namespaces:
        seen = request.getfixturevalue("shared_upload")
        marks, stderr, result = seen["marks"], seen["stderr"], seen["result"]
        assert _failed_but_q1(result) == [], (result, stderr)  # q1: the shared ATTACK's (its own test reads it)
    else:
        root, roster = request.getfixturevalue("autograder")
        folder = _plant_shadows(root)
        shutil.copy(_bobs(root, roster), root / "submission" / "01_memory_wall.ipynb")
        result, done = _run_from_the_upload(root, ["setpriv", "--bounding-set", "-sys_admin"])  # no unshare
        stderr = done.stderr
        marks = sorted(os.listdir(folder))
    assert marks == [], stderr
    assert ("does not allow new pid and mount namespaces" in stderr) is not namespaces
    if not namespaces:
        assert result["score"] == 8.0, (result, stderr)  # bob's own notebook, graded by distlab's own grader


def test_a_notebook_whose_extension_is_upper_case_is_found(tmp_path):
    # redteam2 class/10 in container mode: an upload holding only 01_memory_wall.IPYNB was "no notebook" (the walk and
    # the root copy matched ".ipynb" case-sensitively); the class walk already finds any case
    (tmp_path / "01_memory_wall.IPYNB").write_text("{}")
    assert gradescope.pick_notebook([tmp_path], "memory_wall").chosen == tmp_path / "01_memory_wall.IPYNB"
    assert "-iname '*.ipynb'" in gradescope._copy_upload("memory_wall")
