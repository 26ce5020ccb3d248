"""The network page's routes (``rpc/ui_routes.py``) against a real in-process node.

``GET /ui`` and its assets come from the installed package and name no other origin; ``GET /ui/snapshot`` shows
a job from its JobSubmit to settled with the height of each phase, is built at most once per head whatever the
number of requests, reads at most ``MAX_BLOCKS`` blocks per refresh, and serves the last document marked stale
when the read pool refuses a refresh.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import cowboy_node.rpc
from cowboy_node.node.node import Node
from cowboy_node.rpc.read_pool import ReadPool, ReadPoolConfig
from cowboy_node.rpc.server import build_app
from cowboy_node.rpc.ui_routes import ASSETS, CSP, POOL_CLIENT, UiConfig, parse_origin
from cowboy_node.rpc.ui_snapshot import MAX_BLOCKS
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.job_instructions import JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.helpers import ALICE, ALICE_SK
from tests.unit.node_harness import (
    JOB_EXAMPLE,
    RUNNER_SKS,
    RUNNERS,
    STAKE,
    Nonces,
    example_caps,
    expect_error,
    expect_ok,
    make_node,
    produce,
)

UI_DIR = Path(cowboy_node.rpc.__file__).parent / "ui"
R0_TEXT = to_checksum_address(RUNNERS[0])


def _count_calls(node: Node) -> dict[str, int]:
    """Count the facade reads a snapshot refresh makes (instruments ``node.api``'s two methods in place)."""
    calls = {"block_activity": 0, "runners_active": 0}
    for name in calls:
        read = getattr(node.api, name)

        def counted(*args: Any, _name: str = name, _read: Any = read) -> Any:
            calls[_name] += 1
            return _read(*args)

        setattr(node.api, name, counted)
    return calls


def _client(node: Node, pool: ReadPool | None = None) -> TestClient[Any, Any]:
    return TestClient(TestServer(build_app(node.api, metrics=node.metrics, read_pool=pool)))


async def _produce(node: Node, txs: list[Any]) -> list[Any]:
    return await asyncio.to_thread(produce, node, txs)  # produce() runs its own event loop


async def _snapshot(c: TestClient[Any, Any]) -> Any:
    return await expect_ok(await c.get("/ui/snapshot"))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href", "action", "data") and v is not None]


# -- the page and its assets --------------------------------------------------------------------------------
async def test_page_is_served_with_a_csp_and_loads_only_assets_the_node_serves() -> None:
    node = make_node()
    async with _client(node) as c:
        resp = await c.get("/ui")
        assert resp.status == 200 and resp.content_type == "text/html"
        assert resp.headers["Content-Security-Policy"] == CSP and resp.headers["X-Frame-Options"] == "DENY"
        html = await resp.text()
        assert html == (UI_DIR / "index.html").read_text()
        parser = _Links()
        parser.feed(html)
        assert sorted(parser.urls) == ["data:,", "ui/static/app.js", "ui/static/history.js", "ui/static/style.css"]
        for name, ctype in ASSETS.items():
            if name == "index.html":
                continue
            asset = await c.get(f"/ui/static/{name}")  # relative to /ui: ui/static/<name>
            assert asset.status == 200 and asset.content_type == ctype, name
            assert await asset.read() == (UI_DIR / name).read_bytes()
            assert asset.headers["X-Content-Type-Options"] == "nosniff"
    node.close()


def test_every_asset_is_package_data_so_wheels_and_editable_installs_carry_it() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["cowboy_node.rpc"]
    for name in ASSETS:
        assert (UI_DIR / name).is_file(), name
        assert any(fnmatch.fnmatch(f"ui/{name}", g) for g in globs), (name, globs)
    assert sorted(p.name for p in UI_DIR.iterdir()) == sorted(ASSETS)  # nothing unserved lies there


def test_scripts_and_styles_load_nothing_from_another_origin() -> None:
    js, css = (UI_DIR / "app.js").read_text(), (UI_DIR / "style.css").read_text()
    assert "://" not in js and "import " not in js and "eval(" not in js
    assert "url(" not in css and "@import" not in css and "://" not in css


@pytest.mark.parametrize("path", ["/ui/static/nope.js", "/ui/static/index.html", "/ui/static/..%2Fserver.py",
                                  "/ui/static/%2e%2e%2fui_routes.py", "/ui/static/", "/ui/nope"])
async def test_anything_but_a_listed_asset_is_404_not_found(path: str) -> None:
    node = make_node()
    async with _client(node) as c:
        await expect_error(await c.get(path), 404, "not_found")
    node.close()


async def test_ui_with_a_slash_redirects_to_the_page_and_head_is_not_served() -> None:
    node = make_node()
    async with _client(node) as c:
        resp = await c.get("/ui/", allow_redirects=False)
        assert resp.status == 302 and resp.headers["Location"] == "../ui"
        head = await c.head("/ui")  # a HEAD answer has no body to check
        assert head.status == 405 and head.headers["Allow"] == "GET"
        await expect_error(await c.get("/ui/snapshot?since=3"), 400, "invalid_query")
    node.close()


# -- the snapshot -------------------------------------------------------------------------------------------
async def test_snapshot_follows_a_job_from_its_submission_to_settled_with_the_height_of_each_phase() -> None:
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    register = n.tx(RUNNER_SKS[0], RunnerRegister(STAKE, caps, card))
    await _produce(node, [register])
    submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads(JOB_EXAMPLE.read_text()))))
    await _produce(node, [submit])
    job_id = "0x" + derive_job_id(submit.tx_hash(), 0).hex()
    async with _client(node) as c:
        doc = await _snapshot(c)
        assert (doc["version"], doc["complete"], doc["stale"]) == (1, True, False)
        assert doc["node"]["height"] == 2 and doc["node"]["chain_id"] == "cowboy-test-1"
        assert [b["height"] for b in doc["blocks"]] == [2, 1, 0]
        assert [b["txs"] for b in doc["blocks"]] == [1, 1, 0]
        assert doc["transactions"] == [
            {"hash": "0x" + submit.tx_hash().hex(), "height": 2, "kind": "job_submit",
             "sender": to_checksum_address(ALICE), "status": "success", "error_code": None},
            {"hash": "0x" + register.tx_hash().hex(), "height": 1, "kind": "runner_register", "sender": R0_TEXT,
             "status": "success", "error_code": None}]
        # M == 1: the JobSubmit assigns at once, to the only runner (configs/examples/job-http.json).
        assert doc["jobs"] == [{"job_id": job_id, "phase": "assigned", "first_seen": 2, "attempt": 0,
                                "committee": [R0_TEXT], "reason": "", "finished_at": 0,
                                "history": [{"phase": "submitted", "height": 2}, {"phase": "assigned", "height": 2}]}]
        assert doc["runners"] == {"available": True, "count": 1, "truncated": False, "items": [
            {"address": R0_TEXT, "index": 0, "health": "healthy", "last_heartbeat": 1, "active_jobs": 1,
             "eligible_now": True, "present": False, "session": False}]}  # no transport: no session, no presence
        members = doc["validators"]["members"]
        assert [(m["index"], m["me"], m["leader"], m["connected"]) for m in members] == [(0, True, True, True)]

        result = n.tx(RUNNER_SKS[0], JobResultSubmit(bytes.fromhex(job_id[2:]), b'{"v": 1}', b"", 0))
        await _produce(node, [result])
        doc = await _snapshot(c)
        assert [b["height"] for b in doc["blocks"]] == [3, 2, 1, 0]
        assert doc["transactions"][0] == {"hash": "0x" + result.tx_hash().hex(), "height": 3,
                                          "kind": "job_result_submit", "sender": R0_TEXT, "status": "success",
                                          "error_code": None}
        assert doc["jobs"] == [{"job_id": job_id, "phase": "settled", "first_seen": 2, "attempt": 0,
                                "committee": [R0_TEXT], "reason": "verified", "finished_at": 3,
                                "history": [{"phase": "submitted", "height": 2}, {"phase": "assigned", "height": 2},
                                            {"phase": "revealed", "height": 3}, {"phase": "settled", "height": 3}]}]
        assert doc["runners"]["items"][0]["active_jobs"] == 0
    node.close()


async def test_snapshot_is_built_once_per_head_whatever_the_number_of_requests() -> None:
    node = make_node()
    calls = _count_calls(node)
    async with _client(node) as c:
        docs = await asyncio.gather(*(_snapshot(c) for _ in range(6)))  # concurrent: they share one refresh
        docs += [await _snapshot(c) for _ in range(3)]
        assert calls["runners_active"] == 1
        assert {d["node"]["height"] for d in docs} == {0}
        await _produce(node, [])
        assert (await _snapshot(c))["blocks"][0]["height"] == 1
        assert calls["runners_active"] == 2
    node.close()


async def test_a_refresh_reads_at_most_max_blocks_blocks_however_far_the_head_moved() -> None:
    node = make_node()
    calls = _count_calls(node)
    for _ in range(MAX_BLOCKS + 5):
        await _produce(node, [])
    async with _client(node) as c:
        doc = await _snapshot(c)
        assert calls["block_activity"] == MAX_BLOCKS
        assert [b["height"] for b in doc["blocks"]] == list(range(MAX_BLOCKS + 5, 5, -1))
        await _produce(node, [])
        doc = await _snapshot(c)
        assert calls["block_activity"] == MAX_BLOCKS + 1  # only the new block
        assert [b["height"] for b in doc["blocks"]] == list(range(MAX_BLOCKS + 6, 6, -1))
    node.close()


class _Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_refused_refresh_serves_the_last_snapshot_marked_stale() -> None:
    node = make_node()
    pool = ReadPool(ReadPoolConfig(per_client_rps=1), clock=_Clock())  # 2 refreshes, then rate limited
    async with _client(node, pool) as c:
        assert (await _snapshot(c))["blocks"][0]["height"] == 0
        await _produce(node, [])
        assert (await _snapshot(c))["blocks"][0]["height"] == 1
        await _produce(node, [])
        doc = await _snapshot(c)
        assert doc["stale"] is True
        assert doc["node"]["height"] == 2  # the head is read on every request
        assert doc["blocks"][0]["height"] == 1  # the rest is the last document
        assert doc["validators"]["finalized_height"] == 2
    node.close()


async def test_a_refused_first_refresh_is_the_pools_error() -> None:
    node = make_node()
    pool = ReadPool(ReadPoolConfig(per_client_rps=1), clock=_Clock())
    async with _client(node, pool) as c:
        for _ in range(2):  # spend the snapshot's tokens before any document exists
            await pool.submit(POOL_CLIENT, lambda handle: None)
        resp = await c.get("/ui/snapshot")
        await expect_error(resp, 429, "rate_limited")
        assert resp.headers["Retry-After"] == "1"
    node.close()


# -- [ui]: other validators and cross-origin reads ------------------------------------------------------------
async def test_without_cors_origins_no_response_carries_a_cors_header() -> None:
    node = make_node()
    async with _client(node) as c:
        for path in ("/status", "/ui/snapshot", "/ui"):
            resp = await c.get(path, headers={"Origin": "http://127.0.0.1:4001"})
            assert resp.status == 200 and "Access-Control-Allow-Origin" not in resp.headers, path
        assert (await _snapshot(c))["peers"] == []
    node.close()


async def test_an_allowed_origin_may_read_status_and_the_snapshot_and_nothing_else() -> None:
    node = make_node()
    ui = UiConfig(peers=("http://127.0.0.1:4011", "https://v2.example:443"),
                  cors_origins=frozenset({"http://127.0.0.1:4001"}))
    async with TestClient(TestServer(build_app(node.api, metrics=node.metrics, ui=ui))) as c:
        allowed, other = {"Origin": "http://127.0.0.1:4001"}, {"Origin": "http://127.0.0.1:4002"}
        for path in ("/status", "/ui/snapshot"):
            resp = await c.get(path, headers=allowed)
            assert resp.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:4001", path
            assert resp.headers["Vary"] == "Origin"
            assert "Access-Control-Allow-Origin" not in (await c.get(path, headers=other)).headers, path
            assert "Access-Control-Allow-Origin" not in (await c.get(path)).headers, path
        for path in ("/height", "/ui", "/runners/active", f"/account/0x{'00' * 20}"):
            assert "Access-Control-Allow-Origin" not in (await c.get(path, headers=allowed)).headers, path
        resp = await c.post("/submit", data=b"\x00", headers={**allowed, "Content-Type": "application/octet-stream"})
        assert resp.status == 400 and "Access-Control-Allow-Origin" not in resp.headers
        assert (await _snapshot(c))["peers"] == ["http://127.0.0.1:4011", "https://v2.example:443"]
    node.close()


@pytest.mark.parametrize("text", ["http://a:1", "https://Node-1.example", "http://[::1]:4000", "http://10.0.0.2:4000"])
def test_parse_origin_accepts_scheme_host_and_port(text: str) -> None:
    assert parse_origin(text) == text.lower()


@pytest.mark.parametrize("text", ["*", "null", "ftp://a:1", "http://a:1/", "http://a:1/status", "http://a:0",
                                  "http://a:65536", "a:1", "http://", "http://a b", 4000, None])
def test_parse_origin_refuses_anything_but_an_origin(text: object) -> None:
    with pytest.raises(ValueError, match="HOST"):
        parse_origin(text)


def test_block_activity_reads_the_block_and_its_receipts_once_whatever_its_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    node = make_node(phase=2)
    n = Nonces()
    caps, card = example_caps()
    txs = [n.tx(RUNNER_SKS[0], RunnerRegister(STAKE, caps, card)),
           *(n.tx(ALICE_SK, JobSubmit(parse_job_request_json(json.loads(JOB_EXAMPLE.read_text())))) for _ in range(3))]
    receipts = produce(node, txs)
    reads = {"block": 0, "receipts": 0}
    blocks = node.chain.blocks

    def counting(name: str) -> Any:
        read = getattr(blocks, name)

        def counted(height: int) -> Any:
            reads[name] += 1
            return read(height)
        return counted

    for name in reads:
        monkeypatch.setattr(blocks, name, counting(name))
    activity = node.api.block_activity(1, 2)
    assert reads == {"block": 1, "receipts": 1}
    assert activity is not None and activity["tx_count"] == 4 and activity["header"]["height"] == 1
    assert [(t["hash"], t["kind"], t["status"]) for t in activity["transactions"]] == [
        ("0x" + txs[0].tx_hash().hex(), "runner_register", "success"),
        ("0x" + txs[1].tx_hash().hex(), "job_submit", "success")]
    assert activity["transactions"][1]["events"] == [e.to_json() for e in receipts[1].events]
    assert node.api.block_activity(2, 32) is None
    node.close()
