"""Issue 32 item 1: the node is assembled in one place, by constructor arguments; nothing is attached to a part
after it is built.

Read with ``ast`` over ``cowboy_node/node/``: an assignment whose target is an attribute (or an item of an
attribute) of anything but ``self``/``cls`` itself — ``node.transport = …``, ``self.consensus.net = …``,
``consensus.handlers[ch] = …`` — is a part wired after construction, and fails here. The allow-list holds the
few objects that are a module's own records, not parts of the node.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NODE = REPO / "cowboy_node" / "node"
CONSENSUS_PARTS = REPO / "cowboy_node" / "consensus" / "service"
"""The consensus service's voter, application and resolver, built by the shell in ``node/`` (issue 32 item 2)."""

ALLOWED = {
    # The state-sync fetcher's per-fetch record (``_Fetch``): its own bookkeeping of chunks asked and peers resting.
    ("statesync.py", "f"),
    # The block-sync client's per-peer records (``_Peer``) and its own state object (``self._s``, a ``_State``
    # dataclass it creates): failure counts, distrust windows, in-flight requests, held certificates.
    ("sync_client.py", "p"), ("sync_client.py", "self._s"), ("sync_client.py", "self._s.peers"),
}
"""``(file, object)`` pairs whose attributes a module may set: each a record that module creates and owns."""


def _owner(target: ast.expr) -> str | None:
    """The object whose attribute ``target`` assigns (``a.b.c = `` → ``a.b``), or None for ``self.x``/``cls.x``,
    plain names and items of plain names."""
    if isinstance(target, ast.Subscript):
        target = target.value
        if not isinstance(target, ast.Attribute):
            return None
    if not isinstance(target, ast.Attribute):
        return None
    base = target.value
    if isinstance(base, ast.Name) and base.id in ("self", "cls"):
        return None
    while isinstance(base, ast.Call | ast.Subscript):  # self._s.peers.setdefault(peer, …).claimed: self._s
        base = base.func if isinstance(base, ast.Call) else base.value
        if isinstance(base, ast.Attribute):
            base = base.value
    return ast.unparse(base)


def late_wiring(root: Path) -> Iterator[str]:
    """``file:line target`` of every attribute assigned on another object under ``root``."""
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            for t in targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    owner = _owner(el)
                    if owner is not None and (path.name, owner) not in ALLOWED:
                        yield f"{path.relative_to(root)}:{node.lineno} {ast.unparse(el)}"


def test_no_part_of_the_node_is_wired_after_construction() -> None:
    found = list(late_wiring(NODE)) + list(late_wiring(CONSENSUS_PARTS))
    assert not found, "attributes assigned on another object (pass them to its constructor instead):\n" + \
        "\n".join(found)


def test_the_check_sees_late_wiring(tmp_path: Path) -> None:
    """What the rule is about: each of these forms is found."""
    (tmp_path / "wiring.py").write_text(
        "def wire(node, consensus, net):\n"
        "    node.transport = net\n"
        "    consensus.handlers[3] = print\n"
        "    node.a, x = 1, 2\n"
        "class C:\n"
        "    def __init__(self, consensus):\n"
        "        self.consensus = consensus\n"
        "        self.consensus.on_built = None\n"
        "        self.ok = 1\n")
    assert [f.split(" ", 1)[1] for f in late_wiring(tmp_path)] == \
        ["node.transport", "consensus.handlers[3]", "node.a", "self.consensus.on_built"]
