"""What a new user meets on a first run (issue 19): lesson 9 without PyTorch says how to install it, in one line."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def test_lesson_9_without_torch_stops_at_its_first_code_cell_with_one_line_of_instructions():
    nb = nbformat.read(ROOT / "notebooks" / "09_verify_with_pytorch.ipynb", as_version=4)
    intro = nb.cells[0].source
    first = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")
    hide_torch = nbformat.v4.new_code_cell("import sys\nsys.modules['torch'] = None  # `import torch` now fails")
    nb.cells = [hide_torch, nb.cells[first]]
    NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = nb.cells[1].outputs
    errors = [out for out in outputs if out.output_type == "error"]
    assert len(errors) == 1 and len(outputs) == 1, outputs
    # one line: the instructions, no stack of frames (MissingDependencyError._render_traceback_)
    assert errors[0].ename == "MissingDependencyError"
    assert len(errors[0].traceback) == 1
    line = errors[0].traceback[0]
    assert "pip install torch==2.13.0" in line and "restart the kernel" in line and "distlab[torch]" not in line
    # and the lesson's own words agree with the README's command
    readme = (ROOT / "README.md").read_text()
    assert "pip install torch==2.13.0" in readme + intro and "distlab[torch]" not in readme + intro


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
