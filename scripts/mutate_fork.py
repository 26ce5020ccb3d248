#!/usr/bin/env python3
"""A fork server for the per-mutant pytest runs of ``scripts/mutate.py``: start-up paid once per session, not once
per mutant.

A mutant's pytest run was mostly start-up (docs/testing.md "Runtime"): the interpreter, pytest and its plugins, and
the third-party libraries the tests import (asyncio, anyio, the crypto bindings, …) — about 0.7 s of a 1.3 s run
for the engine's list — before the code under test is even imported. The server imports those once; each run is a
``fork`` of it that then imports the code under test and the test modules *from disk*, exactly as a fresh process
does, and runs ``pytest.main``. What the server may import is decided by the baseline run of the unmutated tests
(``baseline``): every module it had loaded at its end except those of the tree under test (the copy's packages,
``tests``, ``conftest``), so a mutated module is never among them and each child still imports it from the mutated
file. Each child is a fresh fork of the same untouched server, so one run's state (a test's imports, patched
globals, the event loop) never reaches the next: the isolation of one process per run is kept.

A run is a request on the server's Unix socket: the client sends its working directory, environment, pytest
arguments and time budget (:func:`mutate_select.plan`), and passes its stdin, stdout and stderr (``SCM_RIGHTS``),
so the child writes straight to what cosmic-ray captures; the server answers with the child's exit status. When
the client goes away first (cosmic-ray killed it at the session's timeout), the server kills the child's process
group: nothing outlives its mutant.

    mutate_fork.py baseline MODULES_JSON TARGET -- PYTEST_ARGS...  (the unmutated run; what may be preloaded)
    mutate_fork.py serve SOCKET MODULES_JSON                 (one per session; started and stopped by mutate.py)
    mutate_fork.py run SOCKET MAP|- -- PYTEST_ARGS...        (cosmic-ray's test command)
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling mutate_select (no pytest at its import)
import mutate_select

HEADER = struct.Struct(">I")
"""A request is this length prefix (big-endian u32) and that many bytes of JSON; the reply is one signed i32."""
STATUS = struct.Struct(">i")
STDIO = 3
"""File descriptors passed with a request: the client's stdin, stdout and stderr."""
LOCAL = ("tests", "conftest", "__main__")
"""Top-level names never preloaded, besides the tree's own packages: the test modules and the running script."""


def local_names(tree: Path) -> list[str]:
    """Top-level names the tree itself provides (its directories and modules, :data:`LOCAL`)."""
    mine = {p.name for p in tree.iterdir() if p.is_dir() and not p.name.startswith(".")}
    mine |= {p.stem for p in tree.glob("*.py")}
    return sorted(mine | set(LOCAL))


def module_name(path: str) -> str:
    """``cowboy_node/consensus/header.py`` → ``cowboy_node.consensus.header`` (a package's ``__init__`` → the
    package)."""
    parts = list(Path(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name``'s text imports anywhere (module level or in a function:
    over-approximating only keeps more modules out of the preload), with every parent package an import runs."""
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()

    def add(dotted: str) -> None:
        parts = dotted.split(".")
        out.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            add(base)
            for alias in node.names:
                if f"{base}.{alias.name}" in known:  # `from pkg import submodule`
                    add(f"{base}.{alias.name}")
    return out & known


def dependents(target: str, files: dict[str, str]) -> set[str]:
    """``target`` and every module of ``files`` (name → path) that imports it, directly or through others: the
    modules that must be imported afresh, from the mutated file, in every run."""
    known = set(files)
    edges = {n: imports_of(n, Path(f).read_text(encoding="utf-8"), Path(f).name == "__init__.py", known)
             for n, f in files.items()}
    out, frontier = {target}, [target]
    while frontier:
        done = frontier.pop()
        for n, deps in edges.items():
            if done in deps and n not in out:
                out.add(n)
                frontier.append(n)
    return out


def _tree_files(names: list[str], tree: Path) -> dict[str, str]:
    """The loaded modules of ``names`` whose source is in ``tree``: name → path."""
    root = tree.resolve()
    files = {}
    for name in names:
        where = getattr(sys.modules.get(name), "__file__", None)
        if where and where.endswith(".py") and Path(where).resolve().is_relative_to(root):
            files[name] = where
    return files


def preloadable(names: list[str], tree: Path, files: dict[str, str], fresh: set[str]) -> list[str]:
    """Of the loaded modules ``names`` (in load order), those the server may import: every library, and the
    tree's modules (``files``) that are not ``fresh`` (the mutated module and its :func:`dependents`) nor inside a
    fresh package — never the
    test modules, this script or its sibling, nor anything else of the tree (a namespace package, say)."""
    local = set(local_names(tree))
    out = []
    for name in names:
        top = name.partition(".")[0]
        parts = name.split(".")
        # importing a module imports its packages first: one whose package is fresh would preload that package
        if any(".".join(parts[:k]) in fresh for k in range(1, len(parts) + 1)):
            continue
        if top in LOCAL or top.startswith("mutate_") or top.endswith("_script"):
            continue
        if top in local and name not in files:
            continue
        out.append(name)
    return out


def baseline(modules_json: Path, target_path: str, pytest_args: list[str]) -> int:
    """The unmutated run, in this process; writes the modules it loaded that the server may preload, and those it
    must not hold (the mutated module and its dependents). Its exit status is pytest's (a session starts only on
    0)."""
    code = mutate_select.pytest_main(pytest_args, None)
    tree, target = Path.cwd(), module_name(target_path)
    files = _tree_files(list(sys.modules), tree)
    fresh = dependents(target, files)
    modules_json.write_text(json.dumps({"target": target, "fresh": sorted(fresh),
                                        "preload": preloadable(list(sys.modules), tree, files, fresh)}))
    return code


def _recv_exact(conn: socket.socket, n: int, head: bytes) -> bytes:
    data = head
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            raise ConnectionError("request cut short")
        data += more
    return data


def _child(request: dict[str, Any], fds: list[int], server_path: list[str]) -> None:
    """In the forked child: become the client's process (its directory, environment, stdio, ``sys.path`` as
    ``python -m pytest`` there would have it) and run pytest. Never returns."""
    code = 70  # EX_SOFTWARE: the child failed before pytest ran
    try:
        os.setpgid(0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [request["cwd"], *extra, *server_path[1:]]
        sys.argv = [sys.argv[0], *request["args"]]
        importlib.invalidate_caches()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # pytest marks its plugins' packages for assertion rewriting, and the server imported them already: only
        # their own asserts' messages are affected, never the tests' (test modules are never preloaded).
        args = ["-W", "ignore::pytest.PytestAssertRewriteWarning", *request["args"]]
        code = mutate_select.pytest_main(args, request["budget"])
    except BaseException as exc:  # whatever happened, the status must reach the client
        print(f"mutate-fork: the run failed: {exc!r}", file=sys.stderr, flush=True)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(socket_path: Path, modules_json: Path) -> int:
    """Preload, then fork one child per request until SIGTERM. One thread: a fork from a threaded process could
    copy a lock another thread held."""
    spec = json.loads(modules_json.read_text())
    for name in spec["preload"]:
        with contextlib.suppress(Exception):  # an alias or a platform's module: a child imports it if it needs it
            importlib.import_module(name)
    import pytest  # noqa: F401 — and its plugins, above: what every child would import first

    # A preloaded module that imported the mutated one (a dynamic import the text does not show) would hand every
    # child the unmutated code: refuse, and mutate.py runs the session without the server.
    fresh = set(spec["fresh"])
    held = sorted(n for n in sys.modules if n in fresh or n.partition(".")[0] in ("tests", "conftest"))
    if held:
        print(f"mutate-fork: preloading imported {held[:5]}, which every run must import afresh: refusing to serve",
              file=sys.stderr, flush=True)
        return 1

    server_path = list(sys.path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    listener.listen(16)
    running: dict[int, tuple[socket.socket, int]] = {}  # pidfd → (client connection, child pid)
    by_conn: dict[socket.socket, int] = {}  # client connection → its child's pidfd
    stopping = False

    def stop(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping:
            try:
                watched: list[Any] = [listener, *running, *by_conn]
                ready, _, _ = select.select(watched, [], [], 1.0)
            except InterruptedError:
                continue
            for r in ready:
                if r is listener:
                    _accept(listener, running, by_conn, server_path)
                elif isinstance(r, int):  # a child ended: its status to its client
                    conn, pid = running.pop(r)
                    by_conn.pop(conn, None)
                    _, status = os.waitpid(pid, 0)
                    os.close(r)
                    with contextlib.suppress(OSError):  # the client is gone: nobody to tell
                        conn.sendall(STATUS.pack(os.waitstatus_to_exitcode(status)))
                    conn.close()
                elif r in by_conn:  # the client sent more or went away: either way its run is over
                    _kill(running[by_conn.pop(r)][1])
    finally:
        for _conn, pid in running.values():
            _kill(pid)
        listener.close()
        socket_path.unlink(missing_ok=True)
    return 0


def _kill(pid: int) -> None:
    """End a child and whatever it started (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _accept(listener: socket.socket, running: dict[int, tuple[socket.socket, int]],
            by_conn: dict[socket.socket, int], server_path: list[str]) -> None:
    conn, _ = listener.accept()
    try:
        head, fds, _flags, _addr = socket.recv_fds(conn, HEADER.size + 65536, STDIO)
        if len(fds) != STDIO or len(head) < HEADER.size:
            raise ConnectionError("a request needs its length and three descriptors")
        (length,) = HEADER.unpack(head[:HEADER.size])
        request = json.loads(_recv_exact(conn, length, head[HEADER.size:]))
    except (OSError, ValueError) as exc:  # ConnectionError is an OSError
        print(f"mutate-fork: bad request: {exc}", file=sys.stderr, flush=True)
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        listener.close()
        for pidfd, (other, _pid) in running.items():
            other.close()
            os.close(pidfd)
        conn.close()
        _child(request, fds, server_path)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    running[pidfd] = (conn, pid)
    by_conn[conn] = pidfd


def request(socket_path: Path, args: list[str], budget: float | None) -> int:
    """Run pytest with ``args`` in a child of the server, as this process (its directory, environment, stdio);
    returns the child's exit status (negative: the signal that ended it)."""
    payload = json.dumps({"cwd": os.getcwd(), "env": dict(os.environ), "args": args, "budget": budget}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(socket_path))
        sys.stdout.flush()
        sys.stderr.flush()
        socket.send_fds(conn, [HEADER.pack(len(payload)) + payload], [0, 1, 2])
        reply = _recv_exact(conn, STATUS.size, b"")
    return int(STATUS.unpack(reply)[0])


def run(socket_path: Path, map_arg: str, pytest_args: list[str]) -> int:
    """cosmic-ray's test command: the runs of :func:`mutate_select.plan` (or the whole list alone, ``-``), each in
    a child of the server; the first that fails kills the mutant."""
    runs = mutate_select.plan(Path(map_arg), pytest_args) if map_arg != "-" else [(pytest_args, None)]
    for i, (args, budget) in enumerate(runs):
        if i == len(runs) - 1 and len(runs) > 1:
            print("mutate-select: the whole list", flush=True)
        try:
            status = request(socket_path, args, budget)
        except OSError as exc:  # no server (or it died mid-run): never a false kill, run here instead
            print(f"mutate-fork: the server at {socket_path} is unavailable ({exc}); running in this process",
                  flush=True)
            status = mutate_select.pytest_main(args, budget) if i < len(runs) - 1 else _exec_pytest(args)
        if status != 0:
            return status if status > 0 else 128 - status
    return 0


def _exec_pytest(args: list[str]) -> int:
    os.execv(sys.executable, [sys.executable, "-m", "pytest", *args])
    return 0  # not reached


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"] and len(argv) == 3:
        return serve(Path(argv[1]), Path(argv[2]))
    if "--" in argv:
        sep = argv.index("--")
        head, pytest_args = argv[:sep], argv[sep + 1:]
        if head[:1] == ["baseline"] and len(head) == 3:
            return baseline(Path(head[1]), head[2], pytest_args)
        if head[:1] == ["run"] and len(head) == 3:
            return run(Path(head[1]), head[2], pytest_args)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
