"""No ``cowboy_node`` module imports another module's ``_private`` name (issue 32: ``cli/client_commands.py`` gave
31 of them to five modules): what is shared gets a public name in a module meant to share it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _private_imports(top: str) -> list[str]:
    out = []
    for path in sorted((REPO / top).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == top:
                out += [f"{path.relative_to(REPO)}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_node_module_imports_a_private_name() -> None:
    assert _private_imports("cowboy_node") == []
