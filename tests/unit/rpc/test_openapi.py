"""The OpenAPI contract (``rpc/openapi.py``) names exactly the routes the server registers, and is served."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from cowboy_node.rpc.openapi import OPENAPI_VERSION, contract, operations
from cowboy_node.rpc.server import build_app
from tests.unit.rpc.test_rpc_server import FakeFacade


def _registered_routes() -> set[tuple[str, str]]:
    """``(METHOD, path template)`` of every route of the application (the regex of a parameter stripped)."""
    app = build_app(FakeFacade())  # type: ignore[arg-type]
    out = set()
    for route in app.router.routes():
        resource = route.resource
        assert resource is not None
        out.add((route.method, re.sub(r"\{(\w+):[^}]*\}", r"{\1}", resource.canonical)))
    return out


def test_every_route_has_a_contract_entry_and_every_entry_a_route() -> None:
    routes, documented = _registered_routes(), operations()
    assert routes - documented == set(), "routes without a contract entry"
    assert documented - routes == set(), "contract entries without a route"


def test_every_operation_documents_its_errors_with_their_json_codes() -> None:
    doc = contract()
    assert doc["openapi"] == OPENAPI_VERSION
    for path, item in doc["paths"].items():
        params = set(re.findall(r"\{(\w+)\}", path))
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            assert "500" in op["responses"], where
            assert {p["name"] for p in op.get("parameters", []) if p["in"] == "path"} == params, where
            for status, resp in op["responses"].items():
                if status.startswith(("4", "5")) and not (path == "/health" and status == "503"):
                    schema = resp["content"]["application/json"]["schema"]
                    ref, codes = schema["allOf"]
                    assert ref == {"$ref": "#/components/schemas/Error"}, where
                    assert codes["properties"]["code"]["enum"], where


def test_openapi_json_serves_the_contract() -> None:
    async def go() -> Any:
        client: TestClient[Any, Any] = TestClient(TestServer(build_app(FakeFacade())))  # type: ignore[arg-type]
        await client.start_server()
        try:
            resp = await client.get("/openapi.json")
            assert resp.status == 200 and resp.content_type == "application/json"
            return await resp.json()
        finally:
            await client.close()

    assert asyncio.run(go()) == contract()
