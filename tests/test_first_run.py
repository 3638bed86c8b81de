"""What a new user meets on a first run (issue 19): lesson 9 without PyTorch says how to install it, in one line."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def test_lesson_9_without_torch_says_how_to_install_it_and_shows_the_recorded_results():
    """Issue 31: "Run All" without PyTorch stopped at the first code cell and cleared the saved outputs the prose
    reads. Now the first code cell says how to install PyTorch and every measuring cell shows the outputs recorded
    with it (distlab.verify.recorded), under one line saying so; no cell fails."""
    from distlab.verify import recorded

    nb = nbformat.read(ROOT / "notebooks" / "09_verify_with_pytorch.ipynb", as_version=4)
    intro = nb.cells[0].source
    committed = {c.source.splitlines()[0]: c.outputs for c in nb.cells if c.cell_type == "code"}
    hide_torch = nbformat.v4.new_code_cell("import sys\nsys.modules['torch'] = None  # `import torch` now fails")
    nb.cells = [hide_torch, *nb.cells]
    NotebookClient(nb, timeout=300, allow_errors=True, resources={"metadata": {"path": str(ROOT)}}).execute()
    code = [c for c in nb.cells[1:] if c.cell_type == "code"]
    errors = [out for c in code for out in c.outputs if out.output_type == "error"]
    assert not errors, errors
    first = "".join(out.get("text", "") for out in code[0].outputs)
    assert "pip install torch==2.13.0" in first and "restart the kernel" in first and "distlab[torch]" not in first
    measuring = [c for c in code if c.source.startswith(recorded.MAGIC)]
    assert len(measuring) == len(code) - 1  # every cell after the first measures
    for cell in measuring:
        text = "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")
        saved = committed[cell.source.splitlines()[0]]
        want = "".join(out.get("text", "") for out in saved if out.output_type == "stream")
        assert text == recorded.note() + "\n" + want, cell.source.splitlines()[0]  # the saved text, said recorded
        pictures = [out for out in cell.outputs if "image/png" in out.get("data", {})]
        assert len(pictures) == sum("image/png" in out.get("data", {}) for out in saved)
    # and the lesson's own words agree with the README's command
    readme = (ROOT / "README.md").read_text()
    assert "pip install torch==2.13.0" in readme + intro and "distlab[torch]" not in readme + intro


def test_the_recorded_results_are_the_committed_lessons():
    import json

    from distlab.verify import recorded

    nb = json.loads((ROOT / "notebooks" / "09_verify_with_pytorch.ipynb").read_text(encoding="utf-8"))
    assert recorded.record(nb) == json.loads((ROOT / "distlab" / "data" / recorded.RECORDED_FILE).read_text())
    assert recorded.record(nb)["torch"].startswith("2.13.0")


def lessons_command() -> str:
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```bash\n(python3 -m venv .venv && [^\n]*jupyter lab [^\n]*)\n```", readme).group(1)


def test_the_lessons_command_serves_the_whole_kit_including_the_exercises():
    command = lessons_command()
    assert "--ServerApp.root_dir=. " in command  # the file browser starts at the checkout, so exercises/ is in reach
    assert (ROOT / "exercises").is_dir() and any((ROOT / "exercises").glob("*.ipynb"))


def test_the_lessons_command_reads_the_shipped_setting_from_the_checkout():
    """Both README commands in one .venv: the test command's editable install removes the installed copy of the
    setting (setuptools leaves data-files out of editable installs); the lessons command reads the checkout's."""
    import shlex

    from jupyterlab.labapp import LabApp
    from jupyterlab_server.settings_utils import _get_overrides

    (option,) = [word for word in shlex.split(lessons_command()) if word.startswith("--LabApp.app_settings_dir=")]
    folder = option.split("=", 1)[1]
    assert not Path(folder).is_absolute()  # inside the checkout, whatever pip did to the environment
    assert "app_settings_dir" in LabApp.class_trait_names()
    overrides, error = _get_overrides(str(ROOT / folder))
    assert not error
    assert overrides["@jupyterlab/notebook-extension:tracker"]["windowingMode"] == "defer"


def test_the_readme_says_where_the_distlab_command_is():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in readme and ".venv/bin/distlab" in readme
