"""Red team round 18: `distlab grade` run by an ordinary user, and the Gradescope autograder's two phases.

- 01-nonroot-memory-sum (/work/redteam18/03_nonroot_memory_sum): graded by a user that is not root, the kernel runs
  in bubblewrap as that user with rlimits only (no cgroup can be made). With a 2 GiB memory limit, a notebook's 3
  processes forked through cffi held 2.9 GB resident together (each under its own address-space limit; at the
  defaults 256 processes of 8 GiB each), and the grader said nothing: the note on what is not capped was printed for
  a root grader on a cgroup v2-only host only. Fixed by construction: a grader that is not root is refused in
  bubblewrap mode, the message naming what is not capped, unless --rlimits-only accepts it (then the note is printed).
"""

from __future__ import annotations

import os

import pytest

from class_helpers import ROOT

EXERCISE = ROOT / "exercises" / "01_memory_wall.ipynb"


class _Graded(Exception):
    """Raised by the stand-in grader: the notebook would have been graded."""


def _stand_in(*args, **kwargs):
    raise _Graded


@pytest.mark.parametrize("sandbox", [[], ["--sandbox", "bwrap"], ["--sandbox", "auto"]])
def test_a_grader_that_is_not_root_is_refused_and_told_what_is_not_capped(monkeypatch, capsys, sandbox):
    from distlab import cli
    from distlab.grading import classroom, grade

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(grade, "grade_notebooks", _stand_in)
    monkeypatch.setattr(grade, "grade_notebook", _stand_in)
    monkeypatch.setattr(classroom, "grade_class", _stand_in)
    for extra in ([], ["--out", "/nonexistent/class-out"]):
        assert cli.main(["grade", "--quiet", *sandbox, *extra, "--", str(EXERCISE)]) == 2
        err = capsys.readouterr().err
        assert "not running as root" in err and "--rlimits-only" in err, err
        assert "memory of all of a kernel's processes together" in err, err


def test_rlimits_only_grades_as_an_ordinary_user_and_says_what_is_not_capped(monkeypatch, capsys):
    from distlab import cli
    from distlab.grading import grade

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(grade, "grade_notebooks", _stand_in)
    with pytest.raises(_Graded):
        cli.main(["grade", "--quiet", "--rlimits-only", "--", str(EXERCISE)])
    assert "--rlimits-only: not capped: the memory of all" in capsys.readouterr().err


def test_the_container_and_trusted_modes_are_not_refused_for_an_ordinary_user(monkeypatch):
    from distlab import cli
    from distlab.grading import grade

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(grade, "grade_notebooks", _stand_in)
    for mode in ("--container", "--trusted"):
        with pytest.raises(_Graded):
            cli.main(["grade", "--quiet", mode, "--", str(EXERCISE)])
