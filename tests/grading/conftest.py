"""Helpers shared by the grading tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def execute_notebook():
    """A function: execute a notebook in place in a fresh kernel of this environment; returns it.

    The kernel comes from distlab.grading.kernel.kernel_manager, the one the grader uses (without its sandbox).
    """
    from nbclient import NotebookClient

    from distlab.grading.kernel import kernel_manager

    def execute(nb, cwd, timeout: float = 120, allow_errors: bool = False):
        client = NotebookClient(
            nb,
            km=kernel_manager(),
            timeout=timeout,
            allow_errors=allow_errors,
            resources={"metadata": {"path": str(cwd)}},
        )
        client.execute()
        return nb

    return execute
