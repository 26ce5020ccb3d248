"""HTTP routes of the Runner Registry and the protocol parameters (docs/api.md "Runners and parameters").

``GET /params``, ``GET /runners/active?offset=&limit=``, ``GET /runner/{address}``. The facade must
implement :class:`~cowboy_node.rpc.facade.RunnerFacade`; otherwise these routes answer 501.
(``/runner/{address}/jobs`` belongs to the jobs routes.)
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from cowboy_node.rpc.facade import RpcError, RunnerFacade
from cowboy_node.rpc.params import FACADE_KEY, off_loop, parse_address_param, parse_limit
from cowboy_protocol.crypto.address import to_checksum_address

DEFAULT_RUNNERS_LIMIT = 1000
"""Runners ``/runners/active`` returns when ``limit`` is not given (also the maximum)."""
_OFFSET_RE = re.compile(r"[0-9]{1,10}")
MAX_OFFSET = 2**32 - 1
"""Largest ``offset`` (registry indices are u32)."""


def _runner_facade(request: web.Request) -> RunnerFacade:
    facade = request.app[FACADE_KEY]
    if not isinstance(facade, RunnerFacade):
        raise RpcError(501, "not_implemented", "this node does not serve the runner registry")
    return facade


def parse_offset(text: str) -> int:
    """A decimal integer in ``0..2^32−1``; else 400 ``invalid_offset``."""
    if _OFFSET_RE.fullmatch(text) is None or int(text) > MAX_OFFSET:
        raise RpcError(400, "invalid_offset", f"offset must be a decimal integer in 0..{MAX_OFFSET}")
    return int(text)


async def handle_params(request: web.Request) -> web.Response:
    """``GET /params``: every governed protocol parameter at the head."""
    return web.json_response(await off_loop(_runner_facade(request).params))


async def handle_runners_active(request: web.Request) -> web.Response:
    """``GET /runners/active?offset=0&limit=1000``: the active-runner array in registry-index order."""
    q = request.query
    offset = parse_offset(q["offset"]) if "offset" in q else 0
    limit = parse_limit(q["limit"]) if "limit" in q else DEFAULT_RUNNERS_LIMIT
    return web.json_response(await off_loop(_runner_facade(request).runners_active, offset, limit))


def runner_found(doc: dict[str, Any] | None, address: bytes) -> dict[str, Any]:
    """``doc``, or 404 ``runner_not_found`` naming the address when the runner never registered."""
    if doc is None:

        raise RpcError(404, "runner_not_found", f"no runner has registered at {to_checksum_address(address)}")
    return doc


async def handle_runner(request: web.Request) -> web.Response:
    """``GET /runner/{address}``: one registration; 404 ``runner_not_found`` if the address never registered."""
    address = parse_address_param(request.match_info["address"])
    return web.json_response(runner_found(await off_loop(_runner_facade(request).runner, address), address))


def add_runner_routes(router: web.UrlDispatcher) -> None:
    """Register the runner and parameter routes on ``router``."""
    router.add_get("/params", handle_params, allow_head=False)
    router.add_get("/runners/active", handle_runners_active, allow_head=False)
    router.add_get("/runner/{address}", handle_runner, allow_head=False)
