"""HTTP routes of the Job Dispatcher (docs/api.md "Jobs").

``GET /job/{id}``, ``GET /job/{id}/status``, ``GET /job/{id}/results`` and the poll fallback
``GET /runner/{address}/jobs?limit=&after=`` (CIP-11 §14; 410 ``poll_disabled`` once ``CIP11_POLL_DISABLED`` is
set). The facade must implement :class:`~cowboy_node.rpc.facade.JobFacade`; otherwise these routes answer 501.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from cowboy_node.rpc.facade import JobFacade, RpcError
from cowboy_node.rpc.params import FACADE_KEY, off_loop, parse_address_param, parse_limit
from cowboy_node.rpc.runner_routes import runner_found

DEFAULT_POLL_LIMIT = 100
"""Assignments ``/runner/{address}/jobs`` returns when ``limit`` is not given (the maximum is 1000)."""
_JOB_ID_RE = re.compile(r"(?:0[xX])?([0-9a-fA-F]{64})")


def _job_facade(request: web.Request) -> JobFacade:
    facade = request.app[FACADE_KEY]
    if not isinstance(facade, JobFacade):
        raise RpcError(501, "not_implemented", "this node does not serve jobs")
    return facade


def parse_job_id(text: str, param: str = "id") -> bytes:
    """``0x`` + 64 hex digits (prefix optional) -> 32 bytes; else 400 ``invalid_job_id``."""
    m = _JOB_ID_RE.fullmatch(text)
    if m is None:
        raise RpcError(400, "invalid_job_id", f"{param} must be a job id: 32 bytes as 0x-prefixed hex (64 digits)")
    return bytes.fromhex(m.group(1))


async def _job_doc(request: web.Request, method: Callable[[JobFacade], Callable[[bytes], Any]]) -> web.Response:
    job_id = parse_job_id(request.match_info["id"])
    doc = await off_loop(method(_job_facade(request)), job_id)
    if doc is None:
        raise RpcError(404, "job_not_found", f"no job 0x{job_id.hex()}")
    return web.json_response(doc)


async def handle_job(request: web.Request) -> web.Response:
    """``GET /job/{id}``: the whole job record."""
    return await _job_doc(request, lambda f: f.job)


async def handle_job_status(request: web.Request) -> web.Response:
    """``GET /job/{id}/status``: status, attempt, committee, windows and the head height."""
    return await _job_doc(request, lambda f: f.job_status)


async def handle_job_results(request: web.Request) -> web.Response:
    """``GET /job/{id}/results``: the reveals (hex, and parsed when JSON) and the verified outcome."""
    return await _job_doc(request, lambda f: f.job_results)


async def handle_runner_jobs(request: web.Request) -> web.Response:
    """``GET /runner/{address}/jobs?limit=100&after=0x<job id>``: the runner's live assignments (poll fallback)."""
    address = parse_address_param(request.match_info["address"])
    q = request.query
    limit = parse_limit(q["limit"]) if "limit" in q else DEFAULT_POLL_LIMIT
    after = parse_job_id(q["after"], "after") if "after" in q else None
    doc = await off_loop(_job_facade(request).runner_jobs, address, limit, after)
    return web.json_response(runner_found(doc, address))


def add_job_routes(router: web.UrlDispatcher) -> None:
    """Register the job routes and the poll fallback on ``router``."""
    router.add_get("/job/{id}", handle_job, allow_head=False)
    router.add_get("/job/{id}/status", handle_job_status, allow_head=False)
    router.add_get("/job/{id}/results", handle_job_results, allow_head=False)
    router.add_get("/runner/{address}/jobs", handle_runner_jobs, allow_head=False)
