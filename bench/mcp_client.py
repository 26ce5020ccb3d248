"""MCP executor benchmark (prints JSON): the SDK-based executor (``cowboy_runner/executors/mcp*.py``) against the
hand-written one it replaced (``bench/mcp_legacy_*.py``, the baseline), both calling the same unmodified reference
server ``mcp-server-time`` in the same run, over stdio and over streamable HTTP.

Per transport, each executor runs ``--calls`` jobs (``convert_time`` 12:00 UTC → Asia/Tokyo) the way the daemon
does (``execute(job, None, deadline_s=…)``), after ``--warmup`` jobs that start the process / session; the two
executors alternate in ``--repeat`` rounds (ABAB…) so that load on this shared machine hits both alike, and the
best round of each is kept. Reported per job: wall time (the server's work included, the same for both) and the
CPU time of this process (the runner's side only: client, transport, asyncio). ``ratio`` = SDK / hand-written.
Both executors reuse their session across jobs (stdio: one process; HTTP: the kept ``Mcp-Session-Id``).

``line_cap`` is the measurement behind not using the SDK's ``stdio_client`` (docs/runner-executors.md §MCP): a
program answers ``initialize`` with ``--flood-mib`` MiB and no newline; traced peak memory of this process while
the SDK's ``stdio_client`` + ``ClientSession`` reads it, against the runner's stdio transport at its default
4 MiB cap (``tracemalloc``; the SDK's reader keeps the whole unterminated line).

Usage: python bench/mcp_client.py [--calls 200] [--warmup 5] [--repeat 3] [--flood-mib 24]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import mcp_legacy_http
from cowboy_protocol.types.jobspec import McpJob
from cowboy_runner.executors import ExecutorError, McpConfig, McpExecutor, McpServerConfig

TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")
JOB = McpJob(server="time", tool_name="convert_time",
             arguments={"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
HTTP_SERVER = """
import socket, uvicorn
from mcp_server_time.server import create_server
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(64)
print(sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(create_server("UTC").streamable_http_app(), log_level="warning")).run(sockets=[sock])
"""


class _Executor(Protocol):
    async def execute(self, job: McpJob, bounds: None, *, deadline_s: float) -> Any: ...
    async def aclose(self) -> None: ...


@contextlib.contextmanager
def _http_server() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-c", HTTP_SERVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


async def _round(ex: _Executor, calls: int) -> dict[str, float]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await ex.execute(JOB, None, deadline_s=30)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"wall_us_per_call": wall / calls * 1e6, "runner_cpu_us_per_call": cpu / calls * 1e6}


async def _compare(server: McpServerConfig, args: argparse.Namespace) -> dict[str, Any]:
    config = McpConfig(servers={"time": server})
    executors: dict[str, _Executor] = {
        "handwritten": mcp_legacy_http.McpExecutor(config, max_output_bytes=256 * 1024),
        "sdk": McpExecutor(config, max_output_bytes=256 * 1024)}
    best: dict[str, dict[str, float]] = {}
    try:
        for ex in executors.values():
            for _ in range(args.warmup):
                await ex.execute(JOB, None, deadline_s=30)
        for _ in range(args.repeat):
            for name, ex in executors.items():
                r = await _round(ex, args.calls)
                if name not in best or r["runner_cpu_us_per_call"] < best[name]["runner_cpu_us_per_call"]:
                    best[name] = r
    finally:
        for ex in executors.values():
            await ex.aclose()
    ratio = {k: round(best["sdk"][k] / best["handwritten"][k], 2) for k in best["sdk"]}
    return {"baseline_handwritten": _rounded(best["handwritten"]), "sdk": _rounded(best["sdk"]),
            "ratio_sdk_to_handwritten": ratio}


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 1) for k, v in d.items()}


FLOOD = "import sys; sys.stdin.readline(); sys.stdout.write('x' * ({n} << 20)); sys.stdout.flush()"


@contextlib.asynccontextmanager
async def _traced() -> AsyncIterator[dict[str, int]]:
    out: dict[str, int] = {}
    tracemalloc.start()
    try:
        yield out
    finally:
        out["peak_traced_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


async def _line_cap(mib: int) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    program = [sys.executable, "-c", FLOOD.format(n=mib)]
    async with _traced() as sdk:
        t0 = time.perf_counter()
        try:
            async with stdio_client(StdioServerParameters(command=program[0], args=program[1:])) as (r, w), \
                    ClientSession(r, w) as session:
                await asyncio.wait_for(session.initialize(), 120)
            sdk_outcome = "initialized"
        except Exception as e:  # the SDK's task groups wrap its MCPError in ExceptionGroups
            leaf: BaseException = e
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            sdk_outcome = f"{type(leaf).__name__}: {leaf}"[:120]
        sdk["seconds"] = round(time.perf_counter() - t0, 2)  # type: ignore[assignment]
    runner_ex = McpExecutor(McpConfig(servers={"time": McpServerConfig(command=tuple(program))}),
                            max_output_bytes=256 * 1024)
    async with _traced() as runner:
        t0 = time.perf_counter()
        try:
            await runner_ex.execute(JOB, None, deadline_s=120)
            runner_outcome = "answered"
        except ExecutorError as e:
            runner_outcome = e.code
        finally:
            await runner_ex.aclose()
        runner["seconds"] = round(time.perf_counter() - t0, 2)  # type: ignore[assignment]
    return {"flood_bytes": mib << 20, "runner_cap_bytes": McpConfig().max_response_bytes,
            "baseline_sdk_stdio_client": {**sdk, "outcome": sdk_outcome},
            "runner_stdio_transport": {**runner, "outcome": runner_outcome},
            "peak_ratio_sdk_to_runner": round(sdk["peak_traced_bytes"] / max(runner["peak_traced_bytes"], 1), 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flood-mib", type=int, default=24)
    args = parser.parse_args()
    result: dict[str, Any] = {"benchmark": "mcp_client", "mcp": version("mcp"),
                              "mcp_server_time": version("mcp-server-time"), "calls": args.calls,
                              "repeat": args.repeat}
    result["stdio"] = await _compare(McpServerConfig(command=(str(TIME_SERVER), "--local-timezone", "UTC")), args)
    with _http_server() as url:
        result["http"] = await _compare(McpServerConfig(url=url), args)
    result["line_cap"] = await _line_cap(args.flood_mib)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
