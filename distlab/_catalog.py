"""Case-insensitive name lookup for the catalogs, with close-name suggestions."""

from __future__ import annotations

import difflib
from typing import Mapping, TypeVar

from .errors import UnknownNameError

T = TypeVar("T")


def lookup(catalog: Mapping[str, T], name, kind: str) -> T:
    """Return catalog[name] ignoring case and surrounding spaces, or raise UnknownNameError."""
    if not isinstance(name, str):
        raise UnknownNameError(f"{kind} name must be a string, got {name!r}")
    key = name.strip().lower()
    if key in catalog:
        return catalog[key]
    close = difflib.get_close_matches(key, list(catalog), n=4, cutoff=0.4)
    hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(sorted(catalog))}"
    raise UnknownNameError(f"unknown {kind} {name!r}; {hint}")
