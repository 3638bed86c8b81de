"""The exception hierarchy. Every error distlab raises on purpose is a DistlabError.

Widgets catch DistlabError and show its message in place of the result; any other
exception reaching a student is a bug.
"""

from __future__ import annotations

__all__ = [
    "DistlabError",
    "ConfigurationError",
    "UnknownNameError",
    "UnitError",
    "OutOfMemoryError",
    "MissingDependencyError",
]


class DistlabError(Exception):
    """Base class: a problem with the inputs or a limit of the physics, explained in words."""


class ConfigurationError(DistlabError, ValueError):
    """A parameter has an invalid value (names the parameter, the value and what is valid)."""


class UnknownNameError(ConfigurationError):
    """A catalog lookup found no entry of that name (the message lists the closest names)."""


class UnitError(DistlabError, ValueError):
    """A quantity has the wrong dimension or cannot be parsed."""


class OutOfMemoryError(DistlabError):
    """A configuration needs more memory per GPU than the GPU has."""

    def __init__(self, message: str, *, needed_bytes: float, capacity_bytes: float):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.capacity_bytes = capacity_bytes

    @property
    def overflow_bytes(self) -> float:
        return self.needed_bytes - self.capacity_bytes


class MissingDependencyError(DistlabError, ImportError):
    """An optional dependency (PyTorch, for distlab.verify) is not installed, or is a version whose API differs."""

    def _render_traceback_(self) -> list:
        """What IPython shows in place of the traceback: the instructions alone (the frames would hide them)."""
        return [f"{type(self).__name__}: {self}"]
