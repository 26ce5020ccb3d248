"""The package structure (DESIGN.md §3): layers with arrows only downward, no import cycle, a pure core.

Imports are read with ``ast`` from every module, top-level and inside functions or ``if TYPE_CHECKING:``
blocks alike: an import inside a function is still an import. ``from pkg import sub`` where ``pkg.sub`` is a
module counts as an import of that module (not of every module ``pkg/__init__`` imports).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TOPS = ("cowboy_protocol", "cowboy_node", "cowboy_runner")

LAYERS: list[set[str]] = [
    {"cowboy_protocol"},                                  # what both daemons speak: codec, keys, wire types
    {"cowboy_node.types", "cowboy_node.crypto"},          # node-only data types, BLS
    {"cowboy_node.state"},                                # stores and the state commitment
    {"cowboy_node.execution"},                            # the pure state transition
    {"cowboy_node.chain"},                                # block store, commit, genesis, mempool
    {"cowboy_node.consensus"},                            # header checks, beacon, the producer
    {"cowboy_node.observability"},                        # metrics and logs of everything below
    {"cowboy_node.snapshot"},                             # state snapshots: take, verify, install (files)
    {"cowboy_node.p2p", "cowboy_node.transport", "cowboy_node.rpc"},  # peers, runners, clients (never each other)
    {"cowboy_node.node"},                                 # process start-up, config, keys, wiring
    {"cowboy_node.cli"},                                  # the cowboy-node commands
]
"""Node packages, lowest first: a package may import only packages of a lower layer (and itself)."""
RUNNER_MAY_IMPORT = {"cowboy_protocol"}
"""``cowboy_runner`` sees only the shared protocol package."""

PURE = [("cowboy_node", "execution"), ("cowboy_node", "state"), ("cowboy_node", "types"),
        ("cowboy_node", "consensus"),
        ("cowboy_protocol", "codec"), ("cowboy_protocol", "types"), ("cowboy_protocol", "jobs"),
        ("cowboy_protocol", "transport")]
"""Packages that never read the clock, randomness, the OS, the network or the environment (rule 1). The execution
core and below import nothing above ``execution``; ``consensus`` (sans-I/O engine, forks, records) may also import
``chain`` beneath it (the block store it builds on): its clock, timers and peer I/O come in through Protocols."""
FORBIDDEN_MODULES = {"time", "datetime", "random", "secrets", "os", "socket", "asyncio", "threading",
                     "uuid", "subprocess", "urllib", "aiohttp", "aioquic", "structlog", "logging"}
# The LevelDB adapter is the storage boundary: it needs `os` to open its directory path (os.fspath/PathLike).
# A lock guards the tree cache against concurrent readers; it does not affect what is computed. So does the one of
# the compiled-code cache (read-only RPC calls run on state snapshots beside the block builder), and the one of the
# selection index remembered per state root (execution/jobs/selection_index.py: derived data, same answers).
# The vote journal is consensus's durability boundary: it must fsync each own vote (and its directory) before the
# vote leaves (restart safety); what it writes is decided by the sans-I/O engine, not by the OS.
ALLOWED = {("cowboy_node/state/leveldb.py", "os"), ("cowboy_node/consensus/journal.py", "os"),
           ("cowboy_node/state/tree.py", "threading"),
           ("cowboy_node/execution/actors/codecache.py", "threading"),
           ("cowboy_node/execution/jobs/selection_index.py", "threading")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for top in TOPS for p in sorted((REPO / top).rglob("*.py"))}


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports (standard library and third party included), wherever the import is."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                yield sub if sub in MODULES else node.module


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "cowboy_node" and len(parts) > 1 else parts[0]


def _layer(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"package {package} is in no layer of LAYERS: add it where it belongs")


def _internal_graph() -> dict[str, set[str]]:
    return {m: {d for d in _imports(p) if d in MODULES and d != m} for m, p in MODULES.items()}


def test_every_node_package_is_in_a_layer() -> None:
    for module in MODULES:
        if module.startswith("cowboy_node."):
            _layer(_package(module))


def test_node_packages_import_only_lower_layers() -> None:
    upward = []
    for module, deps in _internal_graph().items():
        src = _package(module)
        if src in ("cowboy_runner", "cowboy_node"):
            continue
        for dep in deps:
            dst = _package(dep)
            if dst == src or dst == "cowboy_node":
                continue
            if src == "cowboy_protocol" or dst == "cowboy_runner" or _layer(dst) >= _layer(src):
                upward.append(f"{module} -> {dep}")
    assert not upward, "imports that point up or sideways:\n" + "\n".join(sorted(upward))


def test_the_runner_imports_only_the_protocol_package() -> None:
    bad = [f"{m} -> {d}" for m, deps in _internal_graph().items() if m.startswith("cowboy_runner")
           for d in deps if _package(d) not in RUNNER_MAY_IMPORT | {"cowboy_runner"}]
    assert not bad, "\n".join(bad)


def test_importing_every_runner_module_loads_no_node_module_and_no_leveldb() -> None:
    """The runner daemon does not load the validator (nor LevelDB) at run time either."""
    code = ("import importlib, pkgutil, sys, cowboy_runner\n"
            "for m in pkgutil.walk_packages(cowboy_runner.__path__, 'cowboy_runner.'):\n"
            "    importlib.import_module(m.name)\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('cowboy_node', 'plyvel')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_module_import_cycle() -> None:
    assert _cycles(_internal_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(("top", "package"), PURE, ids=[f"{t}.{p}" for t, p in PURE])
def test_pure_packages_import_no_io_or_upper_layers(top: str, package: str) -> None:
    files = sorted((REPO / top / package).rglob("*.py"))
    assert files, package
    for f in files:
        rel = str(f.relative_to(REPO))
        for mod in _imports(f):
            first = mod.split(".")[0]
            if (rel, first) in ALLOWED:
                continue
            assert first not in FORBIDDEN_MODULES, f"{rel} imports {mod}"
            if first == "cowboy_node":
                assert _layer(_package(mod)) <= max(_layer("cowboy_node.execution"), _layer(f"{top}.{package}")), \
                    f"{rel} imports {mod}"


def test_the_protocol_transport_core_does_not_import_its_quic_adapter() -> None:
    """``cowboy_protocol.transport`` (frames, sessions, preimages: sans-I/O) sits below ``cowboy_protocol.quic``."""
    bad = [f"{m} -> {d}" for m, deps in _internal_graph().items() if m.startswith("cowboy_protocol.transport")
           for d in deps if d.startswith("cowboy_protocol.quic")]
    assert not bad, "\n".join(bad)


CONSENSUS_PARTS = ("cowboy_node.consensus.service.voter", "cowboy_node.consensus.service.application",
                   "cowboy_node.consensus.service.resolver", "cowboy_node.consensus.service.bodies",
                   "cowboy_node.consensus.service.ports")
"""The consensus service's sans-I/O parts (issue 32): the voter, the application pipeline, the resolver, and the
ports through which the clock, the runtime, the peer layer, block sync, the log and the metrics come in."""
ABOVE_CONSENSUS = ("cowboy_node.observability", "cowboy_node.snapshot", "cowboy_node.p2p", "cowboy_node.transport",
                   "cowboy_node.rpc", "cowboy_node.node", "cowboy_node.cli")


@pytest.mark.parametrize("module", CONSENSUS_PARTS)
def test_the_consensus_parts_read_no_clock_do_no_io_and_import_nothing_above_consensus(module: str) -> None:
    """Each part exists under ``consensus/`` (so the PURE check covers it) and imports neither a clock, a thread,
    a loop, a logger nor the OS, nor any package above consensus: its metrics arrive through ``ConsensusMetrics``
    (as the transport's through ``TransportMetrics``), its log through ``EventLog``."""
    assert module in MODULES, f"{module} is gone: name the module that took its place here"
    rel = str(MODULES[module].relative_to(REPO))
    for dep in _imports(MODULES[module]):
        assert dep.split(".")[0] not in FORBIDDEN_MODULES, f"{rel} imports {dep}"
        assert not dep.startswith(ABOVE_CONSENSUS), f"{rel} imports {dep}"


def test_no_consensus_module_imports_observability() -> None:
    """``consensus/`` stays below ``observability/`` (metrics and logs come in through Protocols)."""
    bad = [f"{m} -> {d}" for m, deps in _internal_graph().items() if m.startswith("cowboy_node.consensus")
           for d in deps if d.startswith("cowboy_node.observability")]
    assert not bad, "\n".join(bad)


def test_the_consensus_service_shell_builds_the_three_parts() -> None:
    """``node/consensus_service.py`` is the asyncio shell: it imports the voter, the application and the resolver
    (the parts are not re-implemented above consensus)."""
    deps = set(_imports(MODULES["cowboy_node.node.consensus_service"]))
    assert {"cowboy_node.consensus.service.voter", "cowboy_node.consensus.service.application",
            "cowboy_node.consensus.service.resolver"} <= deps
