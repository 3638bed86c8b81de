"""The grader's own Python, however the instructor installed the packages: a runtime run directly (its `python3` a link
to `python3.11`), packages on PYTHONPATH, or packages in the user's site-packages (`pip install --user`). Before
2026-11-29 each of these killed the sandboxed kernel before it answered ("Kernel died before replying to
kernel_info"), and every student scored 0: the sandbox had no `python3` link and bound neither folder."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys

import pytest

from distlab.grading import sandbox
from distlab.grading.kernel import bwrap_available

from test_grade import ANSWERS, IMPORTS, ROOT, write_notebook

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")


def _runtime_python() -> str:
    """The runtime's `python3` (a link to python3.X where the runtime has one): the grader's Python used directly."""
    real = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    link = os.path.join(os.path.dirname(real), "python3")
    return link if os.path.islink(link) else real


def _environment_packages() -> str:
    """This environment's site-packages (the one holding ipykernel, numpy, pint and distlab's editable install)."""
    return next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "ipykernel")))


@pytest.mark.parametrize("where", ["pythonpath", "user-site"])
def test_a_grader_on_the_runtimes_own_python_grades_and_the_checkout_on_its_path_stays_hidden(tmp_path, where):
    # q1 is answered right only if the kernel cannot see the checkout's solutions (a folder on the grader's
    # PYTHONPATH that is not a site-packages folder is never bound)
    probe = f"import os\nanswer_q1 = 0 if os.path.exists({str(ROOT / 'solutions')!r}) else 16\nq1.check(answer_q1)"
    notebook = write_notebook(tmp_path / "sub.ipynb", [IMPORTS, probe, *list(ANSWERS.values())[1:]])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    packages = _environment_packages()
    if where == "pythonpath":
        env.update(PYTHONPATH=os.pathsep.join([packages, str(ROOT)]), PYTHONNOUSERSITE="1")
    else:  # the user site is this environment's packages (a link): its .pth files put distlab on the grader's path
        user_site = tmp_path / "userbase" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        user_site.mkdir(parents=True)
        (user_site / "site-packages").symlink_to(packages)
        env.update(PYTHONUSERBASE=str(tmp_path / "userbase"))
    out = tmp_path / "grade.json"
    run = subprocess.run(
        [_runtime_python(), "-m", "distlab", "grade", "--quiet", "--json", str(out), "--", str(notebook)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.exists(), run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert (result["score"], result["max_score"]) == (8, 8), run.stdout[-2000:]


def test_package_folders_are_site_packages_folders_on_the_path_never_a_checkout(tmp_path, monkeypatch):
    extra = tmp_path / "lib" / "site-packages"
    extra.mkdir(parents=True)
    dist = tmp_path / "dist-packages"
    dist.mkdir()
    checkout = tmp_path / "checkout"
    (checkout / "solutions").mkdir(parents=True)
    missing = tmp_path / "gone" / "site-packages"
    monkeypatch.setattr(
        sys, "path", [*sys.path, str(checkout), str(extra), f"{extra}/", str(dist), str(missing), "rel/site-packages"]
    )
    found = sandbox.package_folders()
    assert str(extra) in found and str(dist) in found
    assert str(checkout) not in found and str(missing) not in found and "rel/site-packages" not in found
    assert len(found) == len(set(found))
    assert not set(found) & {
        os.path.realpath(p) for p in site.getsitepackages()
    }  # the environment's own: bound already
    assert sandbox.sandbox_env(None)["PYTHONPATH"].split(os.pathsep) == [sandbox.SANDBOX_VIEW, *found]  # type: ignore[arg-type]


def _v1_memory_folder() -> str | None:
    """This process's v1 memory cgroup folder, read from /proc/self/cgroup apart from cgroups.memory_hierarchy."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if "memory" in names.split(","):
                folder = "/sys/fs/cgroup/memory" + path
                return folder if os.path.isdir(folder) and os.access(folder, os.W_OK) else None
    return None


def test_a_root_grader_is_told_when_no_kernel_memory_cgroup_can_be_made(tmp_path, monkeypatch, capsys):
    from distlab import cli
    from distlab.grading import cgroups

    assert cgroups.memory_hierarchy() == _v1_memory_folder()
    notebook = write_notebook(tmp_path / "sub.ipynb", [IMPORTS, *ANSWERS.values()])
    note = "no writable cgroup v1 memory hierarchy here"
    assert cli.main(["grade", "--quiet", "--", str(notebook)]) == 0
    told = note in capsys.readouterr().err
    assert told == (os.geteuid() == 0 and _v1_memory_folder() is None)
    # a cgroup v2-only host, as the grader sees it: no v1 hierarchy under the cgroup root
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", str(tmp_path / "no-cgroups"))
    assert cgroups.memory_hierarchy() is None
    assert cli.main(["grade", "--quiet", "--", str(notebook)]) == 0
    assert (note in capsys.readouterr().err) == (os.geteuid() == 0)
