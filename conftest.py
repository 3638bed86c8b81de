"""Repository-wide pytest hooks: lessons that need PyTorch skip cleanly, with the reason, without it.

(tests/conftest.py holds the test settings; this file sits at the root because nbval collects
notebooks/ too, which tests/conftest.py does not reach.)
"""

import pytest

#: Notebooks whose cells import torch (through distlab.verify).
TORCH_NOTEBOOKS = {"09_verify_with_pytorch.ipynb"}


def pytest_collection_modifyitems(config, items):
    from distlab.verify import TORCH_MESSAGE, torch_available

    if torch_available():  # imports torch: a broken install skips too, with the reason
        return

    skip = pytest.mark.skip(reason=TORCH_MESSAGE)
    for item in items:
        if item.path.name in TORCH_NOTEBOOKS:
            item.add_marker(skip)
