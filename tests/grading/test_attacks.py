"""Hostile submissions (issue 15, the reliability review's grader attacks): each ends in a correct grade or a
clear refusal, never a wrong grade, an escape, a crash of the grader or a process left behind.

The notebooks are generated here. Where an attack needs the kernel, several share one notebook (each kernel
costs seconds); each cell reports back through the problems or the answers.
"""

from __future__ import annotations

import json
import math
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distlab import cli
from distlab.errors import ConfigurationError
from distlab.grading import answers, grade, report, submission
from distlab.grading.kernel import bwrap_available
from distlab.lessons import LESSONS
from distlab.lessons.questions import CORRECT, INCORRECT, NumericQuestion

from test_grade import ANSWERS, IMPORTS, LESSON1, ROOT, statuses, write_notebook

#: A hang guard, not a speed check (speed is measured in benchmarks/, never asserted): the bugs these tests pin
#: took minutes (29 s per question, a FIFO forever), a correct run well under a second, so no busy machine trips it.
HANG_GUARD_S = 120


def returns(call, seconds: float = HANG_GUARD_S):
    """call()'s result, from a worker thread; the test fails (rather than hanging CI) if it never returns."""
    import threading

    box: dict = {}

    def run():
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test below
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"no result after {seconds:g} s: it hangs"
    if "error" in box:
        raise box["error"]
    return box["result"]


needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")
ALL_QUESTIONS = [(slug, name, q) for slug, lesson in LESSONS.items() for name, q in lesson.load_questions().items()]


def _ours(pattern: str) -> list[str]:
    """Command lines of this user's processes that contain `pattern`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != os.getuid():
                continue
            line = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if pattern in line:
            found.append(line)
    return found


def _descendants() -> list[int]:
    """The processes below this one (other sessions on the machine run kernels too)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


# --- the sandbox is an operating-system sandbox unless the caller says otherwise ------------------------


def test_without_bubblewrap_untrusted_work_is_refused_not_graded_weaker(monkeypatch, tmp_path, capsys):
    # before: sandbox="auto" silently fell back to the audit hook alone
    monkeypatch.setattr(grade, "bwrap_available", lambda: False)
    for sandbox in ("auto", "bwrap"):
        with pytest.raises(ConfigurationError, match="--trusted"):
            grade.grade_notebook(LESSON1, sandbox=sandbox)
    assert cli.main(["grade", str(LESSON1)]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap" in err and "--container" in err and "--trusted" in err


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0", "-1", "1e9"])
@pytest.mark.parametrize("flag", ["--timeout", "--cell-timeout"])
def test_every_cli_number_is_finite_and_in_range(flag, value, capsys):
    # before: --timeout nan / inf passed the "<= 0" test and every notebook scored 0
    assert cli.main(["grade", str(LESSON1), f"{flag}={value}"]) == 2
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, value",
    [
        ("timeout", math.nan),
        ("timeout", math.inf),
        ("cell_timeout", math.nan),
        ("memory_limit", math.inf),
        ("file_size_limit", -1),
        ("process_limit", 10**9),
        ("timeout", True),
    ],
)
def test_every_api_limit_is_validated(option, value):
    with pytest.raises(ConfigurationError, match=option):
        grade.grade_notebook(LESSON1, **{option: value})


# --- the submitted file ----------------------------------------------------------------------------------


def _fifo(tmp_path):
    path = tmp_path / "01_memory_wall.ipynb"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda t: (t / "01_memory_wall.ipynb").symlink_to(LESSON1) or t / "01_memory_wall.ipynb", "symbolic link"),
        (lambda t: (t / "01_memory_wall.ipynb").symlink_to("/dev/zero") or t / "01_memory_wall.ipynb", "symbolic link"),
        (_fifo, "not a regular file"),
        (lambda t: (t / "01_memory_wall.ipynb").mkdir() or t / "01_memory_wall.ipynb", "not a regular file"),
    ],
)
def test_the_submission_must_be_a_regular_file(tmp_path, make, words):
    # before: a symlink to the solutions scored 7/7, /dev/zero ate the memory, a FIFO hung the grader
    path = make(tmp_path)
    result = returns(lambda: grade.grade_notebook(path))
    assert result.score == 0 and any(words in p for p in result.problems), result.problems


def test_a_huge_notebook_is_refused_without_being_read(tmp_path):
    path = tmp_path / "01_memory_wall.ipynb"
    with open(path, "wb") as f:
        f.truncate(submission.MAX_NOTEBOOK_BYTES + 1)  # sparse: 32 MB on paper, nothing on disk
    problems: list[str] = []
    assert submission.read_submission(path, problems) is None and "MB" in problems[0]
    assert submission.read_submission(LESSON1, []) == LESSON1.read_bytes()


# --- checks: the right dimension, no decimal comma, a reason for anything unreadable -------------------------


def _unit_questions():
    return [
        (f"{slug}.{name}", q)
        for slug, name, q in ALL_QUESTIONS
        if isinstance(q, NumericQuestion) and q.unit not in ("", "%")
    ]


@pytest.mark.parametrize("qid, q", _unit_questions(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_percent_is_not_a_physical_quantity(qid, q):
    # before: "112 %" was taken as 112 GB on every question with a physical unit
    want = q.expected()
    assert q.check(f"{want:.12g} {q.unit}").status == CORRECT
    result = q.check(f"{want:.12g} %")
    assert result.status == INCORRECT and "is not" in result.message, result.message


def test_a_decimal_comma_is_refused_with_a_hint():
    from distlab.lessons.questions import with_params

    q2 = with_params(LESSONS["memory_wall"].load_questions()["q2"], billions=7)  # 7e9 x 16 B = 112 GB
    for text in ("11,2 GB", "0,112 TB", "1,12,0 GB", "112,0 GB"):
        result = q2.check(text)
        assert result.status == INCORRECT and "point" in result.message, (text, result.message)
    assert q2.check("112 GB").status == CORRECT and "too high" in q2.check("1,120 GB").message


def test_unreadable_answers_are_a_not_yet_with_a_reason():
    import numbers

    import numpy as np

    from distlab.units import Q_

    class Liar:
        def __float__(self):
            raise RuntimeError("no")

        def __str__(self):
            raise RuntimeError("no")

    numbers.Real.register(Liar)
    for slug, name, q in ALL_QUESTIONS:
        for answer in (Q_(np.array([1.0, 2.0]), "GB"), Q_(1 + 2j, "GB"), 1 + 2j, Liar(), np.array([1.0, 2.0])):
            result = q.check(answer)  # before: TypeError / RuntimeError escaped check
            assert result.status == INCORRECT and result.message.startswith("not yet"), (slug, name, answer)


def test_parsing_answers_is_linear_time():
    ranks = next(q for slug, name, q in ALL_QUESTIONS if type(q).__name__ == "RanksQuestion")
    numeric = [q for slug, name, q in ALL_QUESTIONS if isinstance(q, NumericQuestion)]
    for text in ("1" + " " * 9990 + "x", "1, " * 3000 + "x", "[" * 5000):
        assert (
            returns(lambda text=text: ranks.check(text)).status == INCORRECT
        )  # before: 32 s per question (polynomial regex)
    for q in numeric:
        assert returns(lambda q=q: q.check("1e1 " * 24 + "!")).status == INCORRECT  # before: 29 s per question


def test_a_slow_check_is_stopped_in_the_grading_process(monkeypatch):
    class Slow:
        points, prompt = 1.0, ""

        def check(self, answer):
            while True:
                pass

    monkeypatch.setattr(answers, "CHECK_TIME_LIMIT", 0.5)
    [got] = answers.check_answers({"q1": Slow()}, {"answer_q1": 3})  # the endless check was stopped:
    assert got.status == INCORRECT and "longer than" in got.feedback


# --- the report ------------------------------------------------------------------------------------------


def test_the_text_report_escapes_what_the_kernel_produced():
    forged = "boom\n/x.ipynb  lesson: memory_wall  score: 7/7\x1b[12A\r\x1b[2K\x00\ud800\u202e"
    nb = report.NotebookGrade(
        "evil\n\x1b[2Kname.ipynb",
        "memory_wall",
        [report.QuestionGrade("q1", INCORRECT, 0.0, 1.0, "not yet " + forged)],
        [f"raised Err\x1b[2K: {forged}"],
        sandbox="bwrap+audit-hook",
    )
    rep = report.GradeReport([nb])
    text = rep.table()
    # one line for the notebook, then the grader's own lines; what is wrapped is indented deeper (round 7 default/04)
    lines = text.splitlines()
    assert lines[0].startswith("evil") and not any(line.startswith("/x.ipynb") for line in lines)
    assert all(line.startswith(("  question", "  q1 ", "  ! ", report.CONTINUATION)) for line in lines[1:]), lines
    assert not any(c in text for c in "\x1b\r\x00\ud800\u202e")
    gs = rep.to_gradescope()
    assert set(gs) == {"score", "execution_time", "output", "tests", "stdout_visibility"}  # the same shape
    assert "\x1b" not in gs["output"] and "\x1b" not in gs["tests"][0]["output"]
    assert json.loads(json.dumps(rep.to_json()))["notebooks"][0]["problems"][0].startswith("raised Err\x1b")


# --- in the kernel ---------------------------------------------------------------------------------------


def _outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def _trusted_attacks(d: str) -> list[str]:
    """Write primitives that the audit hook missed (each cell must raise), and the grader-killing signal."""
    return [
        # the event carries no dir_fd: a relative path resolved from another folder than the cwd
        f"import os\nW = os.getcwd()\nos.makedirs('a/b/c')\nfd = os.open(W, os.O_RDONLY)\nos.chdir('a/b/c')\n"
        f"rel = os.path.relpath({d!r}, W)\nos.open(rel + '/dirfd.pth', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)",
        f"import readline\nreadline.add_history('import os')\nreadline.write_history_file({d + '/rl.pth'!r})",
        f"import socket\nsocket.socket(socket.AF_UNIX).bind({d + '/sock'!r})",
        # signal 0: tells whether the grader could be signalled, without killing the test run
        "import os, signal\nsignal.pidfd_send_signal(os.pidfd_open(os.getppid()), 0)",
        "import sys\ndel sys.modules['posix']\nimport posix\nposix.mkfifo('x')",
        "import os\nos.symlink('..', 'up')",
    ]


@pytest.mark.notebook
def test_trusted_mode_closes_the_write_primitives_and_says_it_is_trusted(tmp_path):
    # before: each of these wrote outside (a planted .pth gave every later grade full marks) or killed the grader
    d = str(_outside(tmp_path))
    attacks = _trusted_attacks(d)
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, ANSWERS["q1"], *attacks, ANSWERS["q2"]])
    result = grade.grade_notebook(path, sandbox="trusted", cell_timeout=30)
    assert os.listdir(d) == []
    assert statuses(result)["q1"] == statuses(result)["q2"] == CORRECT
    raised = [p for p in result.problems if "raised" in p]
    assert len(raised) == len(attacks), result.problems
    assert result.sandbox == "trusted+audit-hook"
    table = report.GradeReport([result]).table()
    assert "TRUSTED" in table and report.GradeReport([result]).to_json()["notebooks"][0]["sandbox"].startswith(
        "trusted"
    )


@pytest.mark.notebook
@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), "container", "trusted"])
def test_the_answer_key_is_not_reachable_from_the_kernel(tmp_path, sandbox):
    # before: answer_qN = qN.expected() was marked correct on 50/50 questions
    questions = LESSONS["memory_wall"].load_questions()
    cells = [IMPORTS, "from distlab.lessons import memory_wall as m"]
    cells += [f"answer_{n} = {n}.expected()" for n in questions]
    cells += [
        "answer_q1 = m.q1.expected.func()",
        "answer_q4 = m._q4(80)",
        "import importlib\nimportlib.reload(m)\nanswer_q2 = m.q2.expected()",
        "answer_q3 = open(m.__file__).read()",
        "import sys\ndel sys.modules['distlab.lessons.memory_wall']\nimport distlab.lessons.memory_wall as m2\n"
        "answer_q5 = m2.q5.expected()",
        # the solutions where they lie, by their exact path (a walk of the whole disk, '/**/solutions/...', found the
        # same file only after the cell's 60 s limit: about 190 s of the suite spent waiting, issue 32)
        f"answer_q6 = open({str(ROOT / 'solutions' / '01_memory_wall.ipynb')!r}).read()",
        "answer_q7 = m.q7.solution().text",
        # through a per-student variant: a copy re-binds the question's templates (its expected function)
        "from distlab.lessons.variants import lesson_variant, personal\n"
        "answer_q2 = lesson_variant('memory_wall', 'x')['q2'].expected()",
        "from distlab.lessons.questions import with_params\nanswer_q3 = with_params(m.q3).expected()",
        "answer_q4 = personal('memory_wall', 'q4', seed='x').expected()",
        # the per-option feedback names every wrong option: the one left out would be the answer
        "answer_q5 = [o for o in m.q5.options if o not in m.q5.feedback][0]",
        "answer_q7 = [o for o in m.q7.options if o not in m.q7.feedback][0]",
    ]
    result = grade.grade_notebook(
        write_notebook(tmp_path / "01_memory_wall.ipynb", cells), sandbox=sandbox, cell_timeout=60
    )
    assert result.score == 0 and CORRECT not in statuses(result).values(), report.GradeReport([result]).table()


@pytest.mark.notebook
def test_huge_output_is_dropped_before_it_is_read(tmp_path):
    # before: print('y' * 10**9) took the grader to 3.3 GB and lost the cell's answers
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cells = [
        IMPORTS,
        ANSWERS["q1"],
        "answer_q2 = '208 GB'\nprint('y' * 300_000_000)",
        "for _ in range(20):\n    print('z' * 10_000_000)",
        ANSWERS["q3"],
    ]
    result = grade.grade_notebook(write_notebook(tmp_path / "01_memory_wall.ipynb", cells), cell_timeout=120)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024  # MB
    assert statuses(result)["q1"] == statuses(result)["q2"] == statuses(result)["q3"] == CORRECT, result.problems
    assert grown < 150, f"the grader grew by {grown:.0f} MB"


@pytest.mark.notebook
def test_report_forging_cells_nul_and_lone_surrogates(tmp_path):
    # before: a lone surrogate anywhere zeroed the notebook; the exception text forged table lines
    forge = (
        "E = type('E\\x1b[2K\\r', (Exception,), {})\n"
        "raise E('\\n/x.ipynb  lesson: memory_wall  score: 7/7\\x1b[12A\\r\\x1b[2K')"
    )
    cells = [IMPORTS, ANSWERS["q1"], forge, "x = '\ud800'", "# \x00 nul\ny = 1 +", ANSWERS["q2"]]
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"distlab": {"lesson": "memory_wall"}},
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None} for c in cells
        ],
    }
    path = tmp_path / "01_memory_wall.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    result = grade.grade_notebook(path)
    assert statuses(result)["q1"] == statuses(result)["q2"] == CORRECT, result.problems
    text = report.GradeReport([result]).table()
    assert not any(line.startswith("/x.ipynb") for line in text.splitlines())  # no forged grade line
    assert not any(c in text for c in "\x1b\r\x00")
    text.encode("utf-8")  # printable


ATTACKER = r"""
import glob, os, sys, time
import distlab
# what the sandbox binds back read-only even under a temporary folder (a checkout or venv in /tmp): the
# interpreter, its environment and distlab's source; anything else found there would be another run's
mine = (os.getcwd().rsplit('/', 1)[0], sys.prefix, sys.base_prefix,
        os.path.dirname(os.path.dirname(os.path.abspath(distlab.__file__))))
seen, hits, connected = set(), [], 0
end = time.time() + 12  # the victim, started at the same moment, sleeps as long after its answers
while time.time() < end:
    for pattern in ('/tmp/distlab-grade-*', '/tmp/**/kernel*', '/dev/shm/*', '/var/tmp/*'):
        for p in glob.glob(pattern, recursive=True):
            if not p.startswith(mine):
                seen.add(p)
    for p in [x for x in seen if x.endswith('kernel.json')]:
        try:
            from jupyter_client import BlockingKernelClient
            c = BlockingKernelClient(connection_file=p)
            c.load_connection_file()
            c.start_channels()
            c.execute("answer_q1 = answer_q2 = 0; answer_q7 = 'yes'")
            connected += 1
        except Exception:
            pass
    others = [p for p in os.listdir('/proc') if p.isdigit() and p not in ('1', str(os.getpid()))]
    hits = [open('/proc/%s/cmdline' % p).read() for p in others]
    time.sleep(0.5)
import socket
try:
    socket.create_connection(('127.0.0.1', PORT), timeout=2)
    answer_q6 = 1
except OSError:
    answer_q6 = 0
answer_q3, answer_q4, answer_q8 = len(seen), connected, sum('ipykernel' in h for h in hits)
"""

LIMITS = (
    "import resource\nanswer_q2 = int(all(resource.getrlimit(getattr(resource, n))[0] != resource.RLIM_INFINITY"
    " for n in ('RLIMIT_AS', 'RLIMIT_NPROC', 'RLIMIT_FSIZE', 'RLIMIT_CPU')))"
)


def _reported(result: dict, question: str) -> str:
    """The number an answer reported, read back from its feedback ("not yet, because 0 GB is too low")."""
    feedback = next(q["feedback"] for q in result["questions"] if q["question"] == question)
    return feedback.split("because ", 1)[1].split()[0]


@pytest.mark.notebook
@needs_bwrap
def test_two_grading_runs_at_once_cannot_see_or_touch_each_other(tmp_path):
    # before: the attacker read the victim's connection file and rewrote its answers (7/7 -> 0/7)
    # the two runs start together and do the same work before their last cells, so the attacker's 12 s watch lies
    # within the victim's 12 s sleep but for the skew of their starts (was 25 s and 20 s: the same overlap, longer)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    (tmp_path / "victim").mkdir()
    (tmp_path / "attacker").mkdir()
    victim = write_notebook(
        tmp_path / "victim" / "01_memory_wall.ipynb", [IMPORTS, *ANSWERS.values(), "import time\ntime.sleep(12)"]
    )
    attacker = write_notebook(
        tmp_path / "attacker" / "01_memory_wall.ipynb", [IMPORTS, ATTACKER.replace("PORT", str(port)), LIMITS]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distlab",
                "grade",
                str(nb),
                "--quiet",
                "--json",
                str(tmp_path / f"{name}.json"),
                "--cell-timeout",
                "60",
            ],
            env=env,
        )
        for name, nb in (("victim", victim), ("attacker", attacker))
    ]
    assert [r.wait(timeout=300) for r in runs] == [0, 0]
    listener.close()
    got = json.loads((tmp_path / "victim.json").read_text())
    assert got["score"] == 8, got["notebooks"][0]["problems"]
    attack = json.loads((tmp_path / "attacker.json").read_text())
    assert attack["notebooks"][0]["problems"] == []
    seen = {q: _reported(attack, q) for q in ("q3", "q4", "q8", "q6")}
    # no other run's folder, connection file or socket; no connection; no other kernel; no network
    assert seen == {"q3": "0", "q4": "0", "q8": "0", "q6": "0"}, seen
    assert _reported(attack, "q2") == "1"  # every resource limit set in the kernel


@pytest.mark.notebook
@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), "trusted"])
def test_no_kernel_or_process_is_left_behind(tmp_path, sandbox, monkeypatch):
    # before: every graded kernel stayed alive until the whole run ended (nbclient does not shut down a
    # kernel whose manager it does not own)
    marker = f"distlab-leak-{os.getpid()}-{sandbox}"
    spawn = (
        f"import subprocess\nsubprocess.Popen(['sleep', '300', '{marker}'], start_new_session=True)"
        if sandbox == "bwrap"
        else "pass"
    )
    before = set(_descendants())
    private_tmp = tmp_path / "tmp"  # other sessions grade in /tmp at the same time
    private_tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private_tmp))
    notebooks = [
        write_notebook(tmp_path / f"{i}_01_memory_wall.ipynb", [IMPORTS, ANSWERS["q1"], spawn]) for i in range(3)
    ]
    for nb in notebooks:
        result = grade.grade_notebook(nb, sandbox=sandbox, _audit_hook=sandbox != "bwrap")
        assert statuses(result)["q1"] == CORRECT, result.problems
        time.sleep(0.5)
        assert set(_descendants()) <= before  # the kernel and its processes ended as soon as its notebook was done
    assert _ours(marker) == []
    assert list(private_tmp.iterdir()) == []  # no run folder left
