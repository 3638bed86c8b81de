"""Shared test settings: hypothesis runs derandomized in CI so a red run is reproducible."""

import gc
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def own_heap():
    """The objects of the tests this worker ran before, frozen out of the garbage collector while a test times the
    kernel's turns: a full collection of an xdist worker's heap (thousands of earlier tests' objects) once held one
    "turn" for 0.73 s of CPU, a cost a lesson's kernel, whose heap is the app's own, never pays."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
