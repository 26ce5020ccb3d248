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
    return web.json_response(doc, headers={"Cache-Control": "no-store"})


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a refresh's exception as seen: every waiting request already got it, or none was left waiting."""
    if not task.cancelled():
        task.exception()


def _with_sessions(runners: dict[str, Any], sessions: frozenset[int] | None) -> dict[str, Any]:
    """``runners`` with each item's ``session`` from the sessions read now."""
    items = [{**r, "session": None if sessions is None else r["index"] in sessions} for r in runners["items"]]
    return {**runners, "items": items}


def add_ui_routes(app: web.Application, pool: ReadPool) -> None:
    """Register the page, its assets and its snapshot on ``app``; refreshes run in ``pool``."""
    app[UI_KEY] = UiState(pool)
    r = app.router
    r.add_get("/ui", handle_page, allow_head=False)
    r.add_get("/ui/", handle_page_slash, allow_head=False)
    r.add_get("/ui/static/{name}", handle_asset, allow_head=False)
    r.add_get("/ui/snapshot", handle_snapshot, allow_head=False)
