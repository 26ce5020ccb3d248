"""The Simplex engine is sans-I/O: no clock, randomness, OS, network, threads or event loop in its package."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.project.test_layering import FORBIDDEN_MODULES, REPO, _imports

SIMPLEX = sorted((REPO / "cowboy_node" / "consensus" / "simplex").glob("*.py"))


def test_the_package_exists() -> None:
    assert {p.name for p in SIMPLEX} >= {"engine.py", "types.py", "scheme.py", "elector.py"}


@pytest.mark.parametrize("path", SIMPLEX, ids=lambda p: p.name)
def test_simplex_modules_are_pure(path: Path) -> None:
    imported = {m.split(".")[0] for m in _imports(path)}
    assert not imported & FORBIDDEN_MODULES, f"{path.name} imports {sorted(imported & FORBIDDEN_MODULES)}"
    allowed_tops = {"cowboy_node", "cowboy_protocol", "__future__", "collections", "dataclasses", "enum",
                    "functools", "hashlib", "itertools", "typing"}
    assert imported <= allowed_tops, f"{path.name} imports {sorted(imported - allowed_tops)}"
    for m in _imports(path):
        if m.startswith("cowboy_node."):
            assert m.split(".")[1] in {"consensus", "crypto", "types", "chain", "execution", "state"}, m
