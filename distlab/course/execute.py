"""Run a notebook in a fresh kernel of the current Python environment (nbclient)."""

from __future__ import annotations

import nbformat


def _current_env_kernel_manager():
    import ipykernel.kernelspec
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class CurrentEnvironment(KernelSpecManager):
        """Every kernel name resolves to ipykernel running on this interpreter (as nbval's --nbval-current-env)."""

        def get_kernel_spec(self, kernel_name):
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict())

    return KernelManager(kernel_name="python3", kernel_spec_manager=CurrentEnvironment())


def execute(nb: nbformat.NotebookNode, cwd: str, timeout: float = 120, allow_errors: bool = False) -> nbformat.NotebookNode:
    """Execute nb in place with working directory cwd and a per-cell timeout (seconds); returns nb."""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        km=_current_env_kernel_manager(),
        timeout=timeout,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb
