"""The live network page (docs/ui.md): ``GET /ui``, its assets ``GET /ui/static/{name}``, and the JSON it polls,
``GET /ui/snapshot``.

Every asset is package data of ``cowboy_node.rpc`` (``rpc/ui/``), read once and served from memory: the page
loads nothing from any other origin (its Content-Security-Policy says so to the browser too).

Cost of the snapshot, whatever the number of open pages: the state reads (job records, runner registry, actor
timers, recent receipts) run in the RPC read pool (``rpc/read_pool.py``: one worker, a CPU budget, a deadline),
at most once per new head — requests for the same head share the cached document, and concurrent requests
share one refresh in flight. When the pool refuses (budget spent, queue full) the last document is served with
``"stale": true``; with no document yet the pool's 503/429 answer goes to the page, which shows it and retries.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import web

from cowboy_node.rpc.facade import NodeFacade, RpcError
from cowboy_node.rpc.params import FACADE_KEY
from cowboy_node.rpc.read_pool import ReadPool
from cowboy_node.rpc.ui_snapshot import LoopView, SessionFacade, UiTracker, node_summary, validators_view

ASSETS: dict[str, str] = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "history.js": "text/javascript",
    "style.css": "text/css",
}
"""Files of ``cowboy_node/rpc/ui/`` the node serves, with their content types; nothing else is reachable."""
POOL_CLIENT = "ui-snapshot"
"""Read-pool client key of snapshot refreshes (one shared key: a refresh serves every open page)."""
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self' http: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""Content-Security-Policy of the page: its own scripts and styles only; ``connect-src`` also allows the other
validators' RPC URLs a user may add (``#peers=``), which those nodes answer only if they allow this origin."""
_HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
MAX_PEERS = 16
"""Most other validators' RPC URLs one page polls (``[ui] peers`` plus the page's ``#peers=``)."""
CORS_PATHS = frozenset({"/status", "/ui/snapshot"})
"""The only routes an allowed origin may read cross-origin (GET, read-only, public chain and node status)."""
_ORIGIN_RE = re.compile(r"(https?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?", re.IGNORECASE)


def parse_origin(text: object) -> str:
    """An origin as a browser sends it: ``http(s)://HOST[:PORT]``, no path, no ``*``; lower-cased scheme and host.
    ValueError saying what is wrong otherwise (``[ui] peers`` and ``[ui] cors_origins`` entries)."""
    if not isinstance(text, str):
        raise ValueError(f"expected a string \"http(s)://HOST[:PORT]\", got {type(text).__name__}")
    m = _ORIGIN_RE.fullmatch(text)
    if m is None or (m.group(3) is not None and not 0 < int(m.group(3)) < 65536):
        raise ValueError(f"expected \"http(s)://HOST[:PORT]\" (no path, no wildcard), got {text!r}")
    return text.lower()


@dataclass(frozen=True, slots=True)
class UiConfig:
    """``config.toml`` ``[ui]``: the other validators the page shows, and who may read this node's status."""

    peers: tuple[str, ...] = ()
    """RPC URLs (``http(s)://HOST:PORT``) of other validators whose ``/status`` the page polls from the browser:
    each must list this node's page origin in its own ``cors_origins``, or be on this page's origin."""
    cors_origins: frozenset[str] = frozenset()
    """Origins (``http(s)://HOST:PORT``, exact) whose pages may read :data:`CORS_PATHS` cross-origin. Empty (the
    default): no CORS header at all, so no other site's page can read this node's RPC from a visitor's browser."""

    def __post_init__(self) -> None:
        if len(self.peers) > MAX_PEERS:
            raise ValueError(f"at most {MAX_PEERS} peers")
        for entry in (*self.peers, *self.cors_origins):
            parse_origin(entry)


def load_assets() -> dict[str, bytes]:
    """Every file of :data:`ASSETS` from the installed package; RuntimeError naming a missing one."""
    root = resources.files("cowboy_node.rpc").joinpath("ui")
    out: dict[str, bytes] = {}
    for name in ASSETS:
        try:
            out[name] = root.joinpath(name).read_bytes()
        except OSError as e:
            raise RuntimeError(f"UI asset cowboy_node/rpc/ui/{name} is missing from the installation: {e}") from e
    return out


@dataclass(slots=True)
class UiState:
    """Per-application state of the page's routes."""

    pool: ReadPool
    """The read pool refreshes run in."""
    config: UiConfig = field(default_factory=UiConfig)
    """``[ui]``."""
    tracker: UiTracker = field(default_factory=UiTracker)
    """The rolling window (only ever touched by the one refresh in flight)."""
    doc: dict[str, Any] | None = None
    """The last snapshot."""
    head: tuple[int, str] | None = None
    """(height, hash) :attr:`doc` is complete for; None forces a refresh."""
    inflight: asyncio.Task[dict[str, Any]] | None = None
    """The refresh running now: later requests wait for it instead of starting another."""
    assets: dict[str, bytes] | None = None
    """Asset bytes, loaded on first use."""


UI_KEY: web.AppKey[UiState] = web.AppKey("ui_state", UiState)


def _asset_response(request: web.Request, name: str) -> web.Response:
    state = request.app[UI_KEY]
    if state.assets is None:
        try:
            state.assets = load_assets()
        except RuntimeError as e:
            raise RpcError(500, "ui_unavailable", str(e)) from None
    headers = dict(_HEADERS)
    if name == "index.html":
        headers["Content-Security-Policy"] = CSP
        headers["X-Frame-Options"] = "DENY"
    return web.Response(body=state.assets[name], content_type=ASSETS[name], charset="utf-8", headers=headers)


async def handle_page(request: web.Request) -> web.Response:
    """``GET /ui``: the page."""
    return _asset_response(request, "index.html")


async def handle_page_slash(request: web.Request) -> web.Response:
    """``GET /ui/``: 302 to ``/ui`` (the page's asset URLs are relative to it; a relative Location keeps a
    reverse proxy's path prefix)."""
    return web.Response(status=302, headers={"Location": "../ui", **_HEADERS})


async def handle_asset(request: web.Request) -> web.Response:
    """``GET /ui/static/{name}``: one of :data:`ASSETS`; 404 ``not_found`` for anything else."""
    name = request.match_info["name"]
    if name not in ASSETS or name == "index.html":
        raise RpcError(404, "not_found", f"no UI asset {name!r}")
    return _asset_response(request, name)


async def _refresh(state: UiState, facade: NodeFacade, view: LoopView) -> dict[str, Any]:
    doc = await state.pool.submit(POOL_CLIENT, lambda handle: state.tracker.refresh(
        facade, view, stop=lambda: handle.interrupted))
    state.doc = doc
    status = view.status
    state.head = (int(status["height"]), str(status["hash"])) if doc["complete"] else None
    return doc


async def handle_snapshot(request: web.Request) -> web.Response:
    """``GET /ui/snapshot``: the page's data (docs/ui.md "Snapshot"); no parameters."""
    if request.query:
        raise RpcError(400, "invalid_query", "/ui/snapshot takes no query parameters")
    state = request.app[UI_KEY]
    facade = request.app[FACADE_KEY]
    status = facade.status()  # cheap, on the event loop like GET /status
    sessions = facade.local_presence() if isinstance(facade, SessionFacade) else None
    head = (int(status["height"]), str(status["hash"]))
    stale = False
    if state.doc is None or state.head != head:
        if state.inflight is None or state.inflight.done():
            state.inflight = asyncio.ensure_future(_refresh(state, facade, LoopView(status, sessions)))
            state.inflight.add_done_callback(_retrieve)
        try:
            # shielded: a page that goes away must not cancel the refresh other pages wait for
            await asyncio.shield(state.inflight)
        except RpcError as e:
            if state.doc is None or e.code == "shutting_down":
                raise
            stale = True  # the pool refused (busy or rate limited): serve the last document
    assert state.doc is not None
    doc = dict(state.doc)
    doc["node"] = node_summary(status)  # the consensus view moves without new blocks: always current
    doc["validators"] = validators_view(status)
    doc["runners"] = _with_sessions(doc["runners"], sessions)
    doc["stale"] = stale
    doc["peers"] = list(state.config.peers)
    return web.json_response(doc, headers={"Cache-Control": "no-store"})


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a refresh's exception as seen: every waiting request already got it, or none was left waiting."""
    if not task.cancelled():
        task.exception()


def _with_sessions(runners: dict[str, Any], sessions: frozenset[int] | None) -> dict[str, Any]:
    """``runners`` with each item's ``session`` from the sessions read now."""
    items = [{**r, "session": None if sessions is None else r["index"] in sessions} for r in runners["items"]]
    return {**runners, "items": items}


async def _cors(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: let an allowed origin read :data:`CORS_PATHS` (a simple GET needs no preflight)."""
    origin = request.headers.get("Origin")
    if origin is None or request.method != "GET" or request.path not in CORS_PATHS:
        return
    if origin.lower() in request.app[UI_KEY].config.cors_origins:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Vary"] = "Origin"


def add_ui_routes(app: web.Application, pool: ReadPool, config: UiConfig | None = None) -> None:
    """Register the page, its assets and its snapshot on ``app``; refreshes run in ``pool``. With
    ``config.cors_origins``, those origins may read ``/status`` and ``/ui/snapshot`` cross-origin."""
    app[UI_KEY] = UiState(pool, config or UiConfig())
    if app[UI_KEY].config.cors_origins:
        app.on_response_prepare.append(_cors)
    r = app.router
    r.add_get("/ui", handle_page, allow_head=False)
    r.add_get("/ui/", handle_page_slash, allow_head=False)
    r.add_get("/ui/static/{name}", handle_asset, allow_head=False)
    r.add_get("/ui/snapshot", handle_snapshot, allow_head=False)
