"""The typed client (``cowboy_protocol/http_client.py``) is built on the served contract (``GET /openapi.json``):
every method names a contract operation with its method and path, its answer type has exactly the schema's
required fields, the URLs it sends fill the operation's template, errors carry the contract's JSON code, and no
caller in the runner or the node CLI builds a URL by hand."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.rpc.server import build_app
from cowboy_protocol.api_types import OPERATIONS
from cowboy_protocol.http_client import ApiError, RpcClient
from tests.unit.rpc.test_rpc_server import FakeFacade

ROOT = Path(__file__).resolve().parents[3]
VERIFYING = {"verified_state", "verified_account", "verified_actor_state"}
"""Methods that call other typed methods and check their answers (no operation of their own)."""


@pytest.fixture
async def served_contract() -> dict[str, Any]:
    client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade())))  # type: ignore[arg-type]
    await client.start_server()
    try:
        resp = await client.get("/openapi.json")
        assert resp.status == 200
        doc: dict[str, Any] = await resp.json()
        return doc
    finally:
        await client.close()


def _client_methods() -> set[str]:
    return {name for name, fn in inspect.getmembers(RpcClient, inspect.isfunction) if not name.startswith("_")}


def test_every_client_method_is_a_listed_operation() -> None:
    assert _client_methods() - VERIFYING == set(OPERATIONS)


def test_every_operation_is_in_the_served_contract_with_its_method_path_and_required_fields(
        served_contract: dict[str, Any]) -> None:
    for name, op in OPERATIONS.items():
        item = served_contract["paths"].get(op.path)
        assert item is not None, f"{name}: {op.path} is not in the contract"
        entry = item.get(op.method.lower())
        assert entry is not None, f"{name}: {op.method} {op.path} is not in the contract"
        assert entry["operationId"] == op.operation_id, name
        schema = entry["responses"]["200"]["content"]["application/json"]["schema"]
        required = set(op.response.__required_keys__)  # type: ignore[attr-defined]
        alternatives = [set(s.get("required", [])) for s in schema.get("oneOf", [schema])]
        assert required in alternatives, f"{name}: {op.response.__name__} requires {sorted(required)}, " \
                                         f"the contract {[sorted(a) for a in alternatives]}"
        declared = set(required) | set(op.response.__optional_keys__)  # type: ignore[attr-defined]
        for alternative in schema.get("oneOf", [schema]):
            if set(alternative.get("required", [])) == required:
                assert set(alternative.get("properties", {})) <= declared, \
                    f"{name}: contract properties {sorted(alternative.get('properties', {}))} not all typed"


def _template_regex(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/?]+", re.escape(template)) + r"(\?.*)?$")


async def test_each_method_requests_its_operation_and_an_error_is_an_api_error_with_the_code() -> None:
    seen: list[tuple[str, str]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs))
        if request.path.startswith("/job/"):
            return web.json_response({"code": "job_not_found", "message": "no such job"}, status=404)
        return web.json_response({"results": []} if request.path == "/submit/batch" else {})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    server = TestServer(app)
    await server.start_server()
    try:
        rpc = RpcClient(str(server.make_url("")))
        a, h = b"\x11" * 20, b"\x22" * 32
        calls = {
            "status": lambda: rpc.status(), "height": lambda: rpc.height(), "params": lambda: rpc.params(),
            "account": lambda: rpc.account(a), "block": lambda: rpc.block(7),
            "transaction": lambda: rpc.transaction(h), "receipt": lambda: rpc.receipt(h),
            "submit": lambda: rpc.submit(b"\x00\x00\x00\x01\xa0"),
            "submit_batch": lambda: rpc.submit_batch([b"\x00\x00\x00\x01\xa0"]),
            "state_proof": lambda: rpc.state_proof(b"k"),
            "actor_read": lambda: rpc.actor_read({"actor": "0x" + a.hex(), "handler": "f"}),
            "actor": lambda: rpc.actor(a), "actor_state": lambda: rpc.actor_state(a, b"k"),
            "actor_state_scan": lambda: rpc.actor_state_scan(a, b"p", 3),
            "actor_timers": lambda: rpc.actor_timers(a), "timer_history": lambda: rpc.timer_history(a, limit=2),
            "simulate": lambda: rpc.simulate({}), "events": lambda: rpc.events({"actor": "0x" + a.hex()}),
            "active_runners": lambda: rpc.active_runners(limit=1), "runner": lambda: rpc.runner(a),
            "runner_jobs": lambda: rpc.runner_jobs(a, limit=5, after=h), "validators": lambda: rpc.validators(),
        }
        assert set(calls) | {"job", "job_status", "job_results"} == set(OPERATIONS)
        for name, call in calls.items():
            seen.clear()
            await asyncio.to_thread(call)
            op = OPERATIONS[name]
            assert len(seen) == 1 and seen[0][0] == op.method, name
            assert _template_regex(op.path).match(seen[0][1]), (name, seen[0][1], op.path)
            if name == "runner_jobs":  # parameters filled and percent-free: the address in EIP-55 form
                assert seen[0][1] == f"/runner/{_checksum(a)}/jobs?limit=5&after=0x{h.hex()}"
        for name in ("job", "job_status", "job_results"):
            with pytest.raises(ApiError) as e:
                await asyncio.to_thread(getattr(rpc, name), h)
            assert (e.value.code, e.value.status, e.value.message) == ("job_not_found", 404, "no such job")
            assert _template_regex(OPERATIONS[name].path).match(seen[-1][1]), name
    finally:
        await server.close()


def _checksum(address: bytes) -> str:
    from cowboy_protocol.crypto.address import to_checksum_address
    return to_checksum_address(address)


def test_the_runner_and_the_node_cli_build_no_url_by_hand() -> None:
    """Every call of the node API from the runner and the node CLI goes through a typed method."""
    files = sorted((ROOT / "cowboy_runner").glob("*.py")) + sorted((ROOT / "cowboy_node" / "cli").glob("*.py"))
    raw = re.compile(r"\b(get_json|post_json|post_tx|_request|urlopen)\(|urllib\.request|http\.client")
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in files
                 for i, line in enumerate(p.read_text().splitlines(), 1) if raw.search(line)]
    assert offenders == []
