"""The execution core is pure: no clock, randomness, OS, network or asyncio (DESIGN.md §3 rule 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "cowboy_node"
PURE = ["execution", "state", "types", "codec"]
FORBIDDEN_MODULES = {"time", "datetime", "random", "secrets", "os", "socket", "asyncio", "threading",
                     "uuid", "subprocess", "urllib", "aiohttp", "aioquic", "structlog", "logging"}
# The LevelDB adapter is the storage boundary: it needs `os` to open its directory path (os.fspath/PathLike).
# A lock guards the tree cache against concurrent readers; it does not affect what is computed. So does the one of
# the compiled-code cache (read-only RPC calls run on state snapshots beside the block builder).
ALLOWED = {("state/leveldb.py", "os"), ("state/tree.py", "threading"),
           ("execution/actors/codecache.py", "threading")}
FORBIDDEN_PACKAGES = {"cowboy_node.chain", "cowboy_node.rpc", "cowboy_node.transport", "cowboy_node.cli",
                      "cowboy_node.observability", "cowboy_node.consensus"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_import_no_io_or_upper_layers(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, package
    for f in files:
        for mod in _imports(f):
            top = mod.split(".")[0]
            if (str(f.relative_to(ROOT)), top) in ALLOWED:
                continue
            assert top not in FORBIDDEN_MODULES, f"{f.relative_to(ROOT)} imports {mod}"
            assert not any(mod == p or mod.startswith(p + ".") for p in FORBIDDEN_PACKAGES), \
                f"{f.relative_to(ROOT)} imports {mod}"
