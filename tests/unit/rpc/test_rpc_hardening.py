"""Hardening of the HTTP API (issue 22): JSON nesting bounded before parsing, JSON errors for what aiohttp answers
itself (over-long header, malformed request), connection accounting, the descriptor reserve, and the upper bound of
every integer key of config.toml."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.node import config as config_module
from cowboy_node.node.config import DEFAULT_INT_BOUNDS, INT_BOUNDS, ConfigError, load_config
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.rpc import conn_limits, server
from cowboy_node.rpc.conn_limits import (
    ConnectionGate,
    ConnLimits,
    DescriptorLimitError,
    describe_error,
    fit_to_descriptors,
    peer_ip,
    raw_json_response,
)
from cowboy_node.rpc.json_body import MAX_JSON_DEPTH, check_json_body, json_depth_exceeds
from cowboy_node.rpc.server import build_app, start_rpc_server
from cowboy_protocol.crypto.keccak import keccak256

ACTOR = "0x" + "ab" * 20


class RecordingFacade:
    """Records every facade call: a refused body must reach none."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def submit_transaction(self, tx_bytes: bytes) -> dict[str, Any]:
        self.calls.append(("submit_transaction", (tx_bytes,)))
        return {"tx_hash": "0x" + keccak256(tx_bytes).hex(), "status": "pending"}

    def read_actor(self, *args: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append(("read_actor", args))
        return {"result": "0x"}

    def health(self) -> dict[str, Any]:
        self.calls.append(("health", ()))
        return {"ok": True}


class LogRecorder:
    """Stands in for the rpc module's structlog logger; keeps every call by level."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def record(event: str, *args: Any, **kw: Any) -> None:
            self.calls.append((level, event, kw))
        return record

    def levels(self) -> set[str]:
        return {level for level, _, _ in self.calls}


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> LogRecorder:
    rec = LogRecorder()
    monkeypatch.setattr(server, "log", rec)
    monkeypatch.setattr(conn_limits, "log", rec)
    return rec


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], RecordingFacade]]:
    facade = RecordingFacade()
    c: TestClient[Any, Any] = TestClient(TestServer(build_app(facade)))  # type: ignore[arg-type]
    await c.start_server()
    yield c, facade
    await c.close()


# -- nesting depth --------------------------------------------------------------------
def _nested(depth: int, *, obj: bool = False) -> bytes:
    if obj:
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize(("body", "deep"), [
    (b"[" * 20_000, True),
    (_nested(MAX_JSON_DEPTH), False),
    (_nested(MAX_JSON_DEPTH + 1), True),
    (_nested(MAX_JSON_DEPTH, obj=True), False),
    (_nested(MAX_JSON_DEPTH + 1, obj=True), True),
    (b'{"tx": "' + b"[" * 5000 + b'"}', False),  # brackets in a string do not count
    (b'{"tx": "\\"' + b"[" * 5000 + b'"}', False),  # nor after an escaped quote
    (b'["\\\\"' + b", [" * 70 + b"]" * 70 + b"]", True),  # an escaped backslash ends the string
    (b"[]" * 100_000, False),
    (b"", False),
])
def test_depth_scan(body: bytes, deep: bool) -> None:
    assert json_depth_exceeds(body) is deep


def test_depth_scan_agrees_with_the_decoder_on_the_limit() -> None:
    assert json.loads(_nested(MAX_JSON_DEPTH)) is not None  # the accepted depth parses without trouble
    with pytest.raises(Exception, match="64") as info:
        check_json_body(_nested(MAX_JSON_DEPTH + 1))
    assert getattr(info.value, "code", None) == "invalid_body"


@pytest.mark.parametrize("body", [
    '{"tx": "0x00"}'.encode("utf-16"),
    '{"tx": "0x00"}'.encode("utf-32-le"),
    b'"\x00"\x00\x22\x41' + b"[\x00" * 100,  # valid UTF-8 that json.loads would read as UTF-16
])
def test_json_bodies_other_than_utf8_are_refused(body: bytes) -> None:
    with pytest.raises(Exception, match="UTF-8") as info:
        check_json_body(body)
    assert getattr(info.value, "code", None) == "invalid_body"


@pytest.mark.parametrize("body", [b"[" * 20_000, b"[" * 20_000 + b"]" * 20_000, b'{"tx":' * 5000 + b"1" + b"}" * 5000,
                                  _nested(MAX_JSON_DEPTH + 1, obj=True)])
@pytest.mark.parametrize("path", ["/submit", "/actor/read"])
async def test_deeply_nested_json_is_400_invalid_body_on_every_json_route(
        client: tuple[TestClient[Any, Any], RecordingFacade], logs: LogRecorder, path: str, body: bytes) -> None:
    c, facade = client
    resp = await c.post(path, data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    doc = await resp.json()
    assert doc["code"] == "invalid_body" and "deeper than 64" in doc["message"]
    assert facade.calls == []  # nothing reached the node
    assert "exception" not in logs.levels() and "error" not in logs.levels()  # no traceback


async def test_json_at_the_depth_limit_reaches_route_validation(
        client: tuple[TestClient[Any, Any], RecordingFacade]) -> None:
    c, facade = client
    resp = await c.post("/submit", data=_nested(MAX_JSON_DEPTH), headers={"Content-Type": "application/json"})
    doc = await resp.json()
    assert resp.status == 400 and doc["code"] == "invalid_body" and "must be an object" in doc["message"]
    resp = await c.post("/submit", data=json.dumps({"tx": "0x0102"}), headers={"Content-Type": "application/json"})
    assert resp.status == 200
    assert facade.calls == [("submit_transaction", (b"\x01\x02",))]


async def test_utf16_json_is_refused_on_submit(client: tuple[TestClient[Any, Any], RecordingFacade]) -> None:
    c, facade = client
    resp = await c.post("/submit", data='{"tx": "0x0102"}'.encode("utf-16"),
                        headers={"Content-Type": "application/json"})
    assert resp.status == 400 and (await resp.json())["code"] == "invalid_body"
    assert facade.calls == []


# -- errors aiohttp answers itself ------------------------------------------------------
@pytest.fixture
async def live() -> AsyncIterator[tuple[int, RecordingFacade]]:
    """The real server (start_rpc_server: conn_limits protocol) on 127.0.0.1."""
    facade = RecordingFacade()
    runner = await start_rpc_server(facade, "127.0.0.1", 0)  # type: ignore[arg-type]
    yield int(runner.addresses[0][1]), facade
    await runner.cleanup()


async def _exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(("raw", "code"), [
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n", "header_too_large"),
    (b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", "header_too_large"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(200)) + b"\r\n",
     "header_too_large"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", "bad_request"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n", "bad_request"),
])
async def test_protocol_errors_are_json(live: tuple[int, RecordingFacade], logs: LogRecorder, raw: bytes,
                                        code: str) -> None:
    port, facade = live
    status, headers, body = await _exchange(port, raw)
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    doc = json.loads(body)
    assert set(doc) == {"code", "message"} and doc["code"] == code
    assert facade.calls == []
    assert "exception" not in logs.levels() and "error" not in logs.levels()


async def test_the_live_server_still_serves_normal_requests(live: tuple[int, RecordingFacade]) -> None:
    port, facade = live
    status, _, body = await _exchange(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and json.loads(body) == {"ok": True}
    assert facade.calls == [("health", ())]


def test_describe_error() -> None:
    assert describe_error(400, LineTooLong(b"xx", 8190))[0] == "header_too_large"
    assert "8190" in describe_error(400, LineTooLong(b"xx", 8190))[1]
    assert describe_error(400, BadHttpMessage("Too many headers received"))[0] == "header_too_large"
    assert describe_error(400, BadHttpMessage("Invalid method"))[0] == "bad_request"
    assert describe_error(500, RuntimeError("boom")) == ("internal_error", "internal server error")
    assert describe_error(504, None)[0] == "timeout"


def test_raw_json_response_is_a_complete_http_message() -> None:
    raw = raw_json_response(503, "too_many_connections", "later", extra_headers="Retry-After: 1\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Connection: close" in head and b"Retry-After: 1" in head
    assert b"Content-Length: %d" % len(body) in head
    assert json.loads(body) == {"code": "too_many_connections", "message": "later"}


# -- connection accounting and the descriptor reserve ---------------------------------
def test_gate_caps_in_all_and_per_address_and_reports_metrics() -> None:
    m = NodeMetrics()
    gate = ConnectionGate(3, 2, m)
    assert gate.admit("10.0.0.1") is None and gate.admit("10.0.0.1") is None
    assert gate.admit("10.0.0.1") == "per_ip_cap"
    assert gate.admit("10.0.0.2") is None
    assert gate.admit("10.0.0.3") == "global_cap"
    assert gate.open == 3 and m.registry.get_sample_value("cowboy_rpc_connections") == 3
    gate.release("10.0.0.1")
    assert gate.open_from("10.0.0.1") == 1 and gate.admit("10.0.0.3") is None
    for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        gate.release(ip)
    assert gate.open == 0 and gate.open_from("10.0.0.1") == 0
    sample = m.registry.get_sample_value
    assert sample("cowboy_rpc_connections_refused_total", {"reason": "per_ip_cap"}) == 1
    assert sample("cowboy_rpc_connections_refused_total", {"reason": "global_cap"}) == 1
    gate.header_timed_out()
    assert sample("cowboy_rpc_header_timeouts_total") == 1


def test_gate_works_without_metrics() -> None:
    gate = ConnectionGate(1, 1, None)
    assert gate.admit("a") is None and gate.admit("b") == "global_cap"
    gate.header_timed_out()


@pytest.mark.parametrize(("peer", "ip"), [
    (("127.0.0.1", 5), "127.0.0.1"), (("::ffff:10.1.2.3", 5, 0, 0), "10.1.2.3"), (("::1", 5, 0, 0), "::1"),
    (("fe80::1%eth0", 5, 0, 2), "fe80::1"), (None, ""), ("/tmp/sock", ""),
])
def test_peer_ip(peer: Any, ip: str) -> None:
    assert peer_ip(peer) == ip


@pytest.fixture
def rlimit(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A fake RLIMIT_NOFILE: ``state["limit"]`` is (soft, hard); setrlimit calls are recorded."""
    state: dict[str, Any] = {"limit": (1024, 4096), "set": [], "refuse": False}

    def getrlimit(which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return state["limit"]  # type: ignore[no-any-return]

    def setrlimit(which: int, limits: tuple[int, int]) -> None:
        if state["refuse"]:
            raise ValueError("not allowed")
        state["set"].append(limits)
        state["limit"] = limits

    monkeypatch.setattr(conn_limits.resource, "getrlimit", getrlimit)
    monkeypatch.setattr(conn_limits.resource, "setrlimit", setrlimit)
    yield state


def test_soft_limit_is_raised_to_the_hard_one_and_the_cap_keeps_the_reserve(rlimit: dict[str, Any],
                                                                            logs: LogRecorder) -> None:
    fitted = fit_to_descriptors(ConnLimits(max_connections=10_000, fd_reserve=256))
    assert rlimit["set"] == [(4096, 4096)]
    assert fitted.max_connections == 4096 - 256
    info = next(kw for level, event, kw in logs.calls if event == "rpc connection limits")
    assert info["nofile_soft_at_start"] == 1024 and info["nofile_soft"] == 4096 and info["max_connections"] == 3840


def test_configured_cap_wins_when_descriptors_are_plenty(rlimit: dict[str, Any]) -> None:
    rlimit["limit"] = (65536, 65536)
    assert fit_to_descriptors(ConnLimits(max_connections=1024)).max_connections == 1024
    assert rlimit["set"] == []


def test_refused_raise_keeps_the_soft_limit(rlimit: dict[str, Any]) -> None:
    rlimit["refuse"] = True
    assert fit_to_descriptors(ConnLimits(max_connections=5000, fd_reserve=256)).max_connections == 1024 - 256


def test_a_limit_below_the_reserve_stops_start_up(rlimit: dict[str, Any]) -> None:
    rlimit["limit"] = (200, 200)
    with pytest.raises(DescriptorLimitError, match="fd_reserve") as info:
        fit_to_descriptors(ConnLimits(fd_reserve=256))
    assert isinstance(info.value, OSError)  # reported by `run` as "cannot listen: ..."


def test_unlimited_hard_limit(rlimit: dict[str, Any]) -> None:
    rlimit["limit"] = (1024, resource.RLIM_INFINITY)
    fitted = fit_to_descriptors(ConnLimits(max_connections=100_000, fd_reserve=256))
    assert rlimit["set"] == [(1 << 20, resource.RLIM_INFINITY)]
    assert fitted.max_connections == 100_000


@pytest.mark.parametrize("field", ["max_connections", "max_connections_per_ip", "header_timeout_ms",
                                   "idle_timeout_ms"])
def test_conn_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ConnLimits(**{field: 0})


async def test_refused_connection_never_reaches_the_app(unused_tcp_port: int) -> None:
    """A connection over the cap gets the 503 and is closed even when it sends a full request at once."""
    hits: list[str] = []

    async def health(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/health", health)
    runner = conn_limits.LimitedAppRunner(app, limits=ConnLimits(max_connections=1), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", unused_tcp_port)
    await site.start()
    holder = socket.create_connection(("127.0.0.1", unused_tcp_port))
    try:
        for _ in range(100):
            if runner.gate.open == 1:
                break
            await asyncio.sleep(0.01)
        status, _, body = await _exchange(unused_tcp_port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 503 and json.loads(body)["code"] == "too_many_connections"
        assert hits == []
    finally:
        holder.close()
        await runner.cleanup()


# -- config.toml integer bounds ---------------------------------------------------------
INT_KEYS = sorted(f"{section}.{key}" for section, keys in config_module._SCHEMA.items()
                  for key, kind in keys.items() if kind is int)


def _load(tmp_path: Path, full: str, value: int) -> Any:
    section, key = full.split(".")
    (tmp_path / "config.toml").write_text(f"[{section}]\n{key} = {value}\n")
    return load_config(tmp_path)


def test_every_integer_key_has_bounds() -> None:
    missing = [k for k in INT_KEYS if k not in INT_BOUNDS]
    assert not missing, f"add {missing} to cowboy_node.node.config.INT_BOUNDS"
    assert set(INT_BOUNDS) <= set(INT_KEYS), "INT_BOUNDS names keys that are not in _SCHEMA"
    for lo, hi in INT_BOUNDS.values():
        assert 0 <= lo <= hi <= DEFAULT_INT_BOUNDS[1]


@pytest.mark.parametrize("full", INT_KEYS)
def test_integer_key_bounds_are_enforced(tmp_path: Path, full: str) -> None:
    lo, hi = INT_BOUNDS.get(full, DEFAULT_INT_BOUNDS)
    attr = full.removeprefix("node.").replace(".", "_")
    assert getattr(_load(tmp_path, full, lo), attr) == lo
    assert getattr(_load(tmp_path, full, hi), attr) == hi
    for bad in (lo - 1, hi + 1, 99999999999999999999):
        with pytest.raises(ConfigError) as info:
            _load(tmp_path, full, bad)
        assert info.value.key == full
        assert f"{lo}..{hi}" in str(info.value) and str(bad) in str(info.value)


@pytest.mark.parametrize(("full", "hi"), [
    ("rpc.max_body_bytes", 64 * 1024 * 1024), ("mempool.max_txs", 1_000_000), ("mempool.max_bytes", 1 << 30),
    ("mempool.max_txs_per_sender", 10_000), ("mempool.max_nonce_gap", 10_000),
    ("mempool.replacement_bump_percent", 1000), ("node.block_time_ms", 600_000),
])
def test_issue_bounds(full: str, hi: int) -> None:
    assert INT_BOUNDS[full][1] == hi


def test_new_rpc_keys_default_and_load(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[rpc]\nmax_connections = 10\nmax_connections_per_ip = 2\n"
                                          "header_timeout_ms = 500\nidle_timeout_ms = 700\nfd_reserve = 100\n")
    cfg = load_config(tmp_path)
    assert (cfg.rpc_max_connections, cfg.rpc_max_connections_per_ip, cfg.rpc_header_timeout_ms,
            cfg.rpc_idle_timeout_ms, cfg.rpc_fd_reserve) == (10, 2, 500, 700, 100)
    (tmp_path / "config.toml").write_text("")
    cfg = load_config(tmp_path)
    defaults = ConnLimits()
    assert (cfg.rpc_max_connections, cfg.rpc_max_connections_per_ip, cfg.rpc_header_timeout_ms,
            cfg.rpc_idle_timeout_ms, cfg.rpc_fd_reserve) == (
        defaults.max_connections, defaults.max_connections_per_ip, defaults.header_timeout_ms,
        defaults.idle_timeout_ms, defaults.fd_reserve)
