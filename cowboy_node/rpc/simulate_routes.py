"""HTTP routes of an actor developer's workflow (docs/api.md): dry runs, events, terminal timers.

``POST /simulate`` (``rpc/simulate.py``), ``GET /events?actor=…`` and ``GET /actor/{address}/timers/history``
(``rpc/event_queries.py``). The facade must implement :class:`SimulateFacade` / :class:`EventFacade`;
otherwise these routes answer 501 ``not_implemented``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from cowboy_node.execution.meter import InterruptHandle
from cowboy_node.rpc.event_queries import (
    DEFAULT_EVENTS_LIMIT,
    DEFAULT_HISTORY_LIMIT,
    MAX_EVENTS_LIMIT,
    MAX_HISTORY_LIMIT,
    MAX_TOPIC_BYTES,
    parse_cursor,
)
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.json_body import check_json_body
from cowboy_node.rpc.params import FACADE_KEY, off_loop, parse_address_param, parse_height
from cowboy_node.rpc.read_pool import ReadPool
from cowboy_node.rpc.simulate import SimulateRequest, parse_simulate_request

_EVENT_PARAMS = frozenset({"actor", "topic", "from", "to", "limit", "cursor"})


@runtime_checkable
class SimulateFacade(Protocol):
    """Dry runs (``rpc/simulate.SimulateQueries`` implements it)."""

    def simulate(self, req: SimulateRequest, *, interrupt: InterruptHandle | None = None) -> dict[str, Any]:
        """Run ``req`` on the head state without committing anything (see ``rpc/simulate.simulate_view``)."""
        ...


@runtime_checkable
class EventFacade(Protocol):
    """Event index reads (``rpc/event_queries.EventQueries`` implements them)."""

    def events(self, actor: bytes, topic: str | None, from_height: int, to_height: int | None,
               after: tuple[int, int] | None, limit: int) -> dict[str, Any]:
        """A page of an actor's events (``rpc/event_queries.events_view``)."""
        ...

    def timer_history(self, actor: bytes, limit: int) -> dict[str, Any]:
        """The actor's most recent terminal timers (``rpc/event_queries.terminal_timers_view``)."""
        ...


def _limit(text: str | None, default: int, maximum: int) -> int:
    if text is None:
        return default
    if not text.isdigit() or len(text) > 7 or not 1 <= int(text) <= maximum:
        raise RpcError(400, "invalid_limit", f"limit must be a decimal integer in 1..{maximum}")
    return int(text)


def _event_facade(request: web.Request) -> EventFacade:
    facade = request.app[FACADE_KEY]
    if not isinstance(facade, EventFacade):
        raise RpcError(501, "not_implemented", "this node does not serve the event index")
    return facade


async def handle_events(request: web.Request) -> web.Response:
    """``GET /events?actor=0x…[&topic=T][&from=H][&to=H][&limit=N][&cursor=H:S]``: a page of an actor's events."""
    q = request.query
    unknown = sorted(k for k in q if k not in _EVENT_PARAMS)
    if unknown:
        raise RpcError(400, "invalid_query", f"unknown parameters {unknown}; expected {sorted(_EVENT_PARAMS)}")
    if "actor" not in q:
        raise RpcError(400, "invalid_query", "actor is required (events are indexed by emitter)")
    actor = parse_address_param(q["actor"])
    topic = q.get("topic")
    if topic is not None and not 0 < len(topic.encode("utf-8", "surrogatepass")) <= MAX_TOPIC_BYTES:
        raise RpcError(400, "invalid_topic", f"topic must be 1..{MAX_TOPIC_BYTES} UTF-8 bytes")
    from_height = parse_height(q["from"]) if "from" in q else 0
    to_height = parse_height(q["to"]) if "to" in q else None
    if to_height is not None and to_height < from_height:
        raise RpcError(400, "invalid_range", "to must not be below from")
    after = parse_cursor(q["cursor"]) if "cursor" in q else None
    limit = _limit(q.get("limit"), DEFAULT_EVENTS_LIMIT, MAX_EVENTS_LIMIT)
    facade = _event_facade(request)
    return web.json_response(await off_loop(facade.events, actor, topic, from_height, to_height, after, limit))


async def handle_timer_history(request: web.Request) -> web.Response:
    """``GET /actor/{address}/timers/history[?limit=N]``: the actor's timers that ended without firing."""
    address = parse_address_param(request.match_info["address"])
    limit = _limit(request.query.get("limit"), DEFAULT_HISTORY_LIMIT, MAX_HISTORY_LIMIT)
    facade = _event_facade(request)
    return web.json_response(await off_loop(facade.timer_history, address, limit))


def simulate_handler(pool_key: web.AppKey[ReadPool]) -> Any:
    """``POST /simulate`` running in the application's read pool under ``pool_key``."""

    async def handle_simulate(request: web.Request) -> web.Response:
        """``POST /simulate``: a dry run of a CallActor or DeployActor on the head state (JSON in, JSON out)."""
        facade = request.app[FACADE_KEY]
        if not isinstance(facade, SimulateFacade):
            raise RpcError(501, "not_implemented", "this node does not serve dry runs")
        if request.content_type.lower() != "application/json":
            raise RpcError(400, "invalid_body", "Content-Type must be application/json")
        body = await request.read()  # the application's client_max_size bounds it (413 body_too_large)
        check_json_body(body)
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise RpcError(400, "invalid_body", "body is not valid JSON") from None
        req = parse_simulate_request(doc)
        result = await request.app[pool_key].submit(
            request.remote or "unknown", lambda interrupt: facade.simulate(req, interrupt=interrupt))
        return web.json_response(result)

    return handle_simulate


def add_workflow_routes(router: web.UrlDispatcher, pool_key: web.AppKey[ReadPool]) -> None:
    """Register ``POST /simulate``, ``GET /events`` and ``GET /actor/{address}/timers/history``."""
    router.add_post("/simulate", simulate_handler(pool_key))
    router.add_get("/events", handle_events, allow_head=False)
    router.add_get("/actor/{address}/timers/history", handle_timer_history, allow_head=False)
