"""The package's layering rules, read from the source with ast (issue 13):

- no module uses another module's private names (`from .memory import _recompute`, `memory._zero_stage(...)`);
  the shared checks live, public, in distlab._arguments. Sibling modules of one subpackage (distlab/pipeline/*,
  for example) may share private names: they are one topic split into files.
"""

from __future__ import annotations

import ast
import pathlib

import distlab

PACKAGE = pathlib.Path(distlab.__file__).parent


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """Absolute name of the module a `from ... import` reads."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _same_subpackage(a: str, b: str) -> bool:
    pa, pb = a.split(".")[:-1], b.split(".")[:-1]
    return len(pa) >= 2 and pa == pb


def _violations():
    found = []
    for path, module in _modules():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        imported_modules = {}  # local name -> absolute module name
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(module, is_package, node)
                if not source.startswith("distlab"):
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    if (PACKAGE.parent / (full.replace(".", "/") + ".py")).exists() or (
                        PACKAGE.parent / full.replace(".", "/") / "__init__.py"
                    ).exists():
                        imported_modules[alias.asname or alias.name] = full
                    elif _private(alias.name) and source != module and not _same_subpackage(module, source):
                        found.append(
                            f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {alias.name} from {source}"
                        )
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported_modules
                and _private(node.attr)
            ):
                target = imported_modules[node.value.id]
                if target != module and not _same_subpackage(module, target):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    assert _violations() == []


def test_the_rule_catches_a_private_import(tmp_path, monkeypatch):
    """The checker itself: a planted cross-module private import is reported (so the test above can fail)."""
    fake = tmp_path / "distlab"
    (fake / "sub").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "memory.py").write_text("def _recompute(m):\n    return m\n")
    (fake / "training.py").write_text("from .memory import _recompute\nfrom . import memory\nmemory._recompute(1)\n")
    (fake / "sub" / "__init__.py").write_text("")
    (fake / "sub" / "a.py").write_text("def _shared():\n    pass\n")
    (fake / "sub" / "b.py").write_text("from .a import _shared\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    found = _violations()
    assert any("training.py:1 imports _recompute" in f for f in found)
    assert any("training.py:3 uses memory._recompute" in f for f in found)
    assert not any("sub/b.py" in f for f in found)  # siblings of one subpackage may share
