"""Binder and Voila: environment.yml matches pyproject.toml and installs distlab from the repository,
the JupyterLab settings distlab ships are what JupyterLab reads, and the README's launch links work."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETTINGS_DIR = "share/jupyter/lab/settings/overrides.d"
SETTINGS = ROOT / SETTINGS_DIR / "distlab.json"
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def environment():
    yaml = pytest.importorskip("yaml")  # PyYAML comes with jupyter_events (jupyterlab)
    return yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))


def _split(env) -> tuple[list[str], list[str]]:
    conda, pip = [], []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip.extend(dep.get("pip", []))
        else:
            conda.append(dep)
    return conda, pip


def test_repo2docker_reads_the_root_environment_yml():
    # a binder/ or .binder/ folder would make repo2docker ignore every configuration file at the root
    for folder in ("binder", ".binder"):
        path = ROOT / folder
        assert not path.exists() or (path / "environment.yml").exists(), f"{folder}/ hides environment.yml"


def test_environment_lists_the_packages_of_pyproject(environment):
    from packaging.requirements import Requirement

    conda, pip = _split(environment)
    listed = {}
    for spec in conda + pip:
        match = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", spec)
        if match and match.group(1) not in (".", "-e"):
            listed[match.group(1).lower()] = match.group(2).replace(" ", "")
    project = PYPROJECT["project"]
    wanted = [
        *project["dependencies"],
        *project["optional-dependencies"]["lessons"],
        *project["optional-dependencies"]["test"],
        *project["optional-dependencies"]["torch"],
    ]
    conda_names = {"torch": "pytorch"}  # conda-forge's name for the same package
    for text in wanted:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11"}):
            continue  # e.g. tomli, for Python 3.10 only: the environment is Python 3.11
        name = conda_names.get(req.name.lower(), req.name.lower())
        assert name in listed, f"{req.name} is in pyproject.toml but not in environment.yml"
        got = listed[name]
        assert got == str(req.specifier), f"{req.name}: {got} in environment.yml, {req.specifier} in pyproject.toml"
    assert "voila" in listed and "jupyterlab" in listed


def test_environment_installs_distlab_from_the_repository_and_pins_nothing(environment):
    conda, pip = _split(environment)
    assert "conda-forge" in environment["channels"]
    assert any(p.strip() in (".", "-e .") for p in pip), "distlab itself must be installed with pip from the repo"
    # lower bounds only: Binder's JupyterLab 4 / ipywidgets 8 are never pinned against
    for spec in conda + pip:
        if not spec.startswith("python="):
            assert "==" not in spec and not re.search(r"(?<![<>=!])=(?!=)", spec), spec


#: The selector of JupyterLab's command-mode shortcuts (notebook-extension:tracker), and distlab's for the keys a
#: focused control uses: the same, but not on an element inside a cell's output (a widget's dropdown, button, slider)
COMMAND_MODE = ".jp-Notebook.jp-mod-commandMode:not(.jp-mod-readWrite) :focus"
OFF_OUTPUTS = COMMAND_MODE + ":not(.jp-OutputArea-output *)"


def test_settings_file_sets_windowing_mode_defer_and_rescopes_shortcuts():
    data = json.loads(SETTINGS.read_text(encoding="utf-8"))
    assert set(data) == {
        "@jupyterlab/apputils-extension:notification",
        "@jupyterlab/notebook-extension:tracker",
        "@jupyterlab/shortcuts-extension:shortcuts",
    }
    # no news prompt over a lesson, no request to a website (test_browser checks that JupyterLab reads them)
    assert data["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert data["@jupyterlab/notebook-extension:tracker"] == {"windowingMode": "defer"}
    shortcuts = data["@jupyterlab/shortcuts-extension:shortcuts"]["shortcuts"]
    # each entry is a pair: JupyterLab's binding disabled, the same command and keys bound off outputs
    disabled = [s for s in shortcuts if s.get("disabled")]
    enabled = [s for s in shortcuts if not s.get("disabled")]
    assert disabled and len(disabled) == len(enabled)
    assert {s["selector"] for s in disabled} == {COMMAND_MODE} and {s["selector"] for s in enabled} == {OFF_OUTPUTS}
    key = lambda s: (s["command"], tuple(s["keys"]))  # noqa: E731
    assert sorted(map(key, disabled)) == sorted(map(key, enabled))


def _keys_a_control_uses(keys: list) -> bool:
    """A binding of keys a focused control types or steps with: every keystroke a key alone or with Shift (letters
    jump a dropdown to an option, arrows, Home and End step it or a slider, Enter presses a button)."""
    return bool(keys) and all(k and all(part == "Shift" for part in k.split()[:-1]) for k in keys)


def test_every_command_mode_key_a_control_uses_is_off_outputs():
    # read JupyterLab's own bindings: a JupyterLab that adds one (or changes a selector) fails here
    from jupyterlab.commands import get_app_dir

    schema = Path(get_app_dir()) / "schemas" / "@jupyterlab" / "notebook-extension" / "tracker.json"
    if not schema.is_file():
        pytest.skip("JupyterLab's schemas are not installed here")
    bindings = json.loads(schema.read_text(encoding="utf-8"))["jupyter.lab.shortcuts"]
    wanted = sorted(
        (b["command"], tuple(b["keys"]))
        for b in bindings
        if b["selector"] == COMMAND_MODE and _keys_a_control_uses(b["keys"])
    )
    # ArrowUp/ArrowDown move the cell cursor (the issue), X cuts a cell, D D deletes one
    for binding in [("notebook:move-cursor-down", ("ArrowDown",)), ("notebook:cut-cell", ("X",))]:
        assert binding in wanted
    assert ("notebook:delete-cell", ("D", "D")) in wanted and ("notebook:run-cell", ("Accel Enter",)) not in wanted
    data = json.loads(SETTINGS.read_text(encoding="utf-8"))
    shortcuts = data["@jupyterlab/shortcuts-extension:shortcuts"]["shortcuts"]
    moved = sorted((s["command"], tuple(s["keys"])) for s in shortcuts if s["selector"] == OFF_OUTPUTS)
    assert moved == wanted


def test_settings_are_installed_where_jupyterlab_reads_them():
    # pyproject's data-files put it in <prefix>/share/jupyter/lab/settings/overrides.d/ on a regular install
    data_files = PYPROJECT["tool"]["setuptools"]["data-files"]
    assert data_files[SETTINGS_DIR] == [f"{SETTINGS_DIR}/distlab.json"]


@pytest.mark.notebook
def test_a_regular_install_ships_the_settings_file(tmp_path):
    # build the wheel pip installs from this checkout: the settings file must be among its data files,
    # which pip puts under <prefix>/ (editable installs leave data-files out, hence the README's plain install)
    import subprocess
    import sys
    import zipfile

    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("distlab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(f".data/data/{SETTINGS_DIR}/distlab.json") for n in names), names


def test_jupyterlab_reads_the_settings_as_the_new_default(tmp_path):
    settings_utils = pytest.importorskip("jupyterlab_server.settings_utils")
    from jupyterlab.commands import get_app_dir

    app_settings = tmp_path / "settings"
    (app_settings / "overrides.d").mkdir(parents=True)
    shutil.copy(SETTINGS, app_settings / "overrides.d" / SETTINGS.name)
    overrides, error = settings_utils._get_overrides(str(app_settings))
    assert not error
    schemas = Path(get_app_dir()) / "schemas"
    if not schemas.is_dir():
        pytest.skip("JupyterLab's schemas are not installed here")
    result, _ = settings_utils.get_settings(
        str(app_settings),
        str(schemas),
        str(tmp_path / "user"),
        "@jupyterlab/notebook-extension:tracker",
        overrides=overrides,
    )
    assert result["schema"]["properties"]["windowingMode"]["default"] == "defer"


def test_readme_links_binder_jupyterlab_and_voila():
    binder = re.search(r"\(https://mybinder\.org/v2/gh/([\w.-]+/[\w.-]+)/HEAD\?urlpath=lab/tree/([^)\s]+)\)", README)
    voila = re.search(r"\(https://mybinder\.org/v2/gh/([\w.-]+/[\w.-]+)/HEAD\?urlpath=voila/render/([^)\s]+)\)", README)
    assert binder and voila, "README lost its Binder badge or Voila link"
    assert binder.group(1) == voila.group(1)
    assert binder.group(2) == "notebooks/01_memory_wall.ipynb"
    for notebook in (binder.group(2), voila.group(2)):
        assert (ROOT / notebook).exists(), notebook
    assert "voila" in " ".join(PYPROJECT["project"]["optional-dependencies"]["lessons"])


def test_ci_installs_the_browser_and_the_sandbox_before_the_tests():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = ci.index("apt-get install")
    # each command a test needs, with the Debian package installed when it is missing (npm: the HTML export test)
    for command, package in (("chromium", "chromium"), ("bwrap", "bubblewrap"), ("npm", "npm")):
        assert f'command -v {command} >/dev/null || missing="$missing {package}"' in ci[:install]
    assert "--no-install-recommends $missing" in ci[install : install + 200]
    assert install < ci.index(".venv/bin/python -m pytest")
    markers = " ".join(PYPROJECT["tool"]["pytest"]["ini_options"]["markers"])
    assert "browser:" in markers


def test_voila_shows_each_output_as_it_runs(monkeypatch):
    # the README's `voila notebooks/07_training_lab.ipynb` and Binder's Voila (a Jupyter Server extension) both read
    # voila.json from the folder they start in, the checkout's root: Voila sends the page at once and shows each
    # cell's output as soon as it has run, so lesson 7's app appears before the cells after it have run (issue 32)
    server_extension = pytest.importorskip(
        "voila.server_extension", reason="voila (the lessons extra) is not installed"
    )
    app_module = pytest.importorskip("voila.app")
    assert json.loads((ROOT / "voila.json").read_text(encoding="utf-8")) == {
        "VoilaConfiguration": {"progressive_rendering": True}
    }
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(ROOT / "no-such-folder"))
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    config = server_extension.load_config_file()  # Binder's
    assert config is not None and config.VoilaConfiguration.progressive_rendering is True
    app = app_module.Voila()  # the standalone app's search path: the folder it starts in, then Jupyter's
    app.load_config_file("voila", path=app.config_file_paths)
    assert app.config.VoilaConfiguration.progressive_rendering is True
