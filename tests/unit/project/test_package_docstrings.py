"""Every package's ``__init__`` says what the package is for (issue 32: "chain package." said nothing)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
INITS = sorted(p for top in ("cowboy_protocol", "cowboy_node", "cowboy_runner")
               for p in (REPO / top).rglob("__init__.py"))


@pytest.mark.parametrize("init", INITS, ids=[str(p.parent.relative_to(REPO)) for p in INITS])
def test_the_package_docstring_says_what_it_is_for(init: Path) -> None:
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    assert re.fullmatch(r"\s*[\w.]+ package\.?\s*", doc) is None, f"{init}: {doc!r} names the package, nothing more"
    assert len(doc.split()) >= 8, f"{init}: {doc!r} is too short to say what the package is for"
