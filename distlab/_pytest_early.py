"""Loaded by pytest before its other plugins (pyproject.toml's addopts: `-p distlab._pytest_early`), in the main
process and in every xdist worker, so that the suite's processes do not repeat work:

- **jsonschema's slow optional import** (distlab.grading.UNUSED_SLOW_IMPORT: about 1 s of CPU per process) is skipped, as
  distlab's own commands skip it. nbval's plugin imports nbformat, and so jsonschema, when pytest loads its plugins,
  before any conftest.py runs; a `-p` module named on the command line loads before them.
- **Bytecode is cached**, as Python does by default. Some machines' images set PYTHONDONTWRITEBYTECODE=1 (this
  project's CI machine among them); then every Python process the suite starts (the xdist workers, notebook and Voila
  kernels, the graders, the CLI, PyTorch's ranks) compiles distlab and the tests again. The grading sandbox is not
  affected: it gives its kernel an environment of its own (grading/sandbox.py) and a read-only package.
"""

import os
import sys

import distlab.grading  # noqa: F401  (importing it marks jsonschema's slow optional import absent)

sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
