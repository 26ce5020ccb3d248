"""The OpenAPI 3.1 contract of the HTTP API, served at ``GET /openapi.json``.

One entry per route the server registers: its parameters (with the patterns the parsers in
``rpc/params.py`` enforce), its request body, and every response it can give, each error response naming the
stable JSON ``code`` values of that status (``components.schemas.Error``). ``tests/unit/test_openapi.py``
fails when a route is registered without an entry here or an entry names no route; schemathesis
(``make fuzz-api``, a short run in ``make test``) checks the live node against it.

The contract is data, built once: route modules stay free of schema text, and the prose in ``docs/api.md``
explains what the codes mean.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["CONNECTION_CODES", "OPENAPI_VERSION", "contract", "operations"]

OPENAPI_VERSION = "3.1.0"
"""The OpenAPI revision of the document."""

CONNECTION_CODES = ("header_too_large", "bad_request", "header_timeout", "too_many_connections")
"""Codes the connection layer (``rpc/conn_limits.py``) answers before any route runs (documented once, in
``info.description``, not per operation: no request a client composes for a route causes them)."""

Schema = dict[str, Any]

_HEX = r"^(0[xX])?([0-9a-fA-F]{2})*$"
_HASH = r"^(0[xX])?[0-9a-fA-F]{64}$"
_HEIGHT = r"^[0-9]{1,20}$"
_ADDRESS = r"^(0[xX])?[0-9a-fA-F]{40}$"
_LIMIT = r"^[0-9]{1,7}$"

_HEX_STR: Schema = {"type": "string", "pattern": r"^0x([0-9a-f]{2})*$"}
_HASH_STR: Schema = {"type": "string", "pattern": r"^0x[0-9a-f]{64}$"}
_ADDR_STR: Schema = {"type": "string", "pattern": r"^0x[0-9a-fA-F]{40}$"}
_UINT: Schema = {"type": "integer", "minimum": 0}
_DEC: Schema = {"type": "string", "pattern": r"^[0-9]+$"}
_NULL_HEX: Schema = {"type": ["string", "null"], "pattern": r"^0x([0-9a-f]{2})*$"}


def _obj(required: dict[str, Schema], **optional: Schema) -> Schema:
    """An object with ``required`` properties (more may appear: the contract grows by adding fields)."""
    return {"type": "object", "required": sorted(required), "properties": {**required, **optional}}


_PROOF: Schema = _obj({"key": _HEX_STR, "value": _NULL_HEX, "steps": {"type": "array", "items": _obj(
    {"bitmap": {"type": "integer", "minimum": 0, "maximum": 65535},
     "siblings": {"type": "array", "items": _HASH_STR}})},
    "leaf": {"oneOf": [{"type": "null"}, _obj({"key_hash": _HASH_STR, "value_hash": _HASH_STR})]}})
_CERTIFIED: dict[str, Schema] = {
    "header": _HEX_STR, "certificate": _NULL_HEX, "state_root": _HASH_STR,
}
"""What a verified read adds (``rpc/verified.py``): the canonical header bytes of the head the proof is
against and the encoded finalization certificate of that header (null while the head is final only through
a descendant not yet committed)."""


def _p(name: str, where: str, pattern: str | None = None, *, required: bool = False,
       description: str = "") -> Schema:
    schema: Schema = {"type": "string"}
    if pattern is not None:
        schema["pattern"] = pattern
    out: Schema = {"name": name, "in": where, "required": required or where == "path", "schema": schema}
    if description:
        out["description"] = description
    return out


def _q(name: str, pattern: str | None = None, description: str = "", *, required: bool = False) -> Schema:
    return _p(name, "query", pattern, required=required, description=description)


_ADDR_PATH = _p("address", "path", _ADDRESS, description="0x + 40 hex digits (EIP-55 when mixed case)")
_HASH_PATH = _p("hash", "path", _HASH, description="32 bytes of hex, 0x optional")
_JOB_PATH = _p("id", "path", _HASH, description="job id: 32 bytes of hex, 0x optional")


def _error(*codes: str) -> Schema:
    return {"description": "error: " + ", ".join(codes), "content": {"application/json": {"schema": {
        "allOf": [{"$ref": "#/components/schemas/Error"},
                  {"properties": {"code": {"enum": list(codes)}}}]}}}}


def _ok(schema: Schema, description: str = "OK") -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _op(summary: str, ok: Schema | None, errors: Mapping[int, tuple[str, ...]], *,
        params: list[Schema] | None = None, body: Schema | None = None, extra: dict[int, Schema] | None = None,
        links: dict[str, Schema] | None = None) -> Schema:
    """One operation; every operation may also answer 500 ``internal_error`` and 405 ``method_not_allowed``."""
    responses: dict[str, Schema] = {}
    if ok is not None:
        responses["200"] = ok
        if links:
            responses["200"]["links"] = links
    for status, schema in (extra or {}).items():
        responses[str(status)] = schema
    all_errors = {**errors, 500: (*errors.get(500, ()), "internal_error")}
    for status in sorted(all_errors):
        responses[str(status)] = _error(*all_errors[status])
    out: Schema = {"summary": summary, "operationId": _operation_id(summary), "responses": responses}
    if params:
        out["parameters"] = params
    if body is not None:
        out["requestBody"] = body
    return out


def _operation_id(summary: str) -> str:
    return summary.split(":", 1)[0].strip().lower().replace(" ", "_").replace("-", "_")


_JSON_BODY_ERR = ("invalid_body",)
_POOL_429 = ("rate_limited",)
_POOL_503 = ("busy", "shutting_down")
_ACTOR_ERR = {400: ("invalid_address",), 404: ("actor_not_found",)}
_NO_RUNNERS = {501: ("not_implemented",)}

_HEALTH = _obj({"ok": {"type": "boolean"}, "height": _UINT, "last_block_age_ms": _UINT})
_BLOCK = _obj({"height": _UINT, "hash": _HASH_STR, "parent_hash": _HASH_STR, "state_root": _HASH_STR,
               "transactions": {"type": "array", "items": _HASH_STR}, "signature": _HEX_STR})
_TX = _obj({"status": {"enum": ["committed", "pending", "evicted"]}})
_RECEIPT = _obj({"status": {"enum": ["success", "failed"]}, "tx_hash": _HASH_STR, "height": _UINT,
                 "index": _UINT, "events": {"type": "array"}})
_ACCOUNT = _obj({"address": _ADDR_STR, "balance": _DEC, "nonce": _UINT, "next_pending_nonce": _UINT},
                proof=_PROOF, **_CERTIFIED)
_STATE_PROOF = _obj({"root": _HASH_STR, "height": _UINT, "proof": _PROOF}, **_CERTIFIED)
_ACTOR_STATE = {"oneOf": [
    _obj({"address": _ADDR_STR, "key": _HEX_STR, "value": _NULL_HEX, "height": _UINT}, proof=_PROOF, **_CERTIFIED),
    _obj({"address": _ADDR_STR, "prefix": _HEX_STR, "entries": {"type": "array"}, "truncated": {"type": "boolean"},
          "height": _UINT})]}
_READ_BODY: Schema = {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["actor", "handler"], "additionalProperties": False,
    "properties": {"actor": {"type": "string", "pattern": _ADDRESS},
                   "handler": {"type": "string", "minLength": 1, "maxLength": 256},
                   "payload": {"type": "string", "pattern": _HEX},
                   "cycles_limit": {"type": "integer", "minimum": 1, "maximum": 10_000_000}}}}}}
_SIMULATE_BODY: Schema = {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": False,
    "properties": {
        "sender": {"type": "string", "pattern": _ADDRESS},
        "call": {"type": "object", "required": ["actor", "handler"], "additionalProperties": False,
                 "properties": {"actor": {"type": "string", "pattern": _ADDRESS},
                                "handler": {"type": "string", "minLength": 1, "maxLength": 256},
                                "payload": {"type": "string", "pattern": _HEX}}},
        "deploy": {"type": "object", "required": ["source"], "additionalProperties": False,
                   "properties": {"source": {"type": "string"}, "salt": {"type": "string", "pattern": _HEX},
                                  "init_handler": {"type": "string"},
                                  "init_payload": {"type": "string", "pattern": _HEX}}},
        "cycles_limit": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
        "cells_limit": {"type": "integer", "minimum": 1}}}}}}
_SUBMIT_BODY: Schema = {"required": True, "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    "application/json": {"schema": {"type": "object", "required": ["tx"],
                                    "properties": {"tx": {"type": "string", "pattern": _HEX}}}}}}
_SUBMIT_BATCH_BODY: Schema = {"required": True, "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    "application/json": {"schema": {"type": "object", "required": ["txs"], "properties": {
        "txs": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": _HEX}}}}}}}
_ADMISSION = ("invalid_body", "malformed", "tx_too_large", "wrong_chain_id", "bad_signature", "nonce_too_low",
              "nonce_too_high", "nonce_gap_too_large", "insufficient_funds", "fee_below_basefee",
              "cycles_limit_too_high", "cells_limit_too_high", "limits_below_intrinsic", "priority_fee_above_max",
              "replacement_underpriced", "already_known", "mempool_full", "sender_limit", "sender_queue_full",
              "queued_full")
_BATCH_ITEM_CODES = [c for c in _ADMISSION if c != "invalid_body"] + ["shutting_down"]
"""Codes one transaction of ``POST /submit/batch`` may be refused with (its own answer inside the 200)."""
_TX_LINKS = {"GetTransaction": {"operationId": "get_transaction", "parameters": {"hash": "$response.body#/tx_hash"}},
             "GetReceipt": {"operationId": "get_receipt", "parameters": {"hash": "$response.body#/tx_hash"}}}
_HTML = {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}}
_ASSET = {"description": "a static asset of the page", "content": {
    "text/javascript": {"schema": {"type": "string"}}, "text/css": {"schema": {"type": "string"}},
    "text/html": {"schema": {"type": "string"}}, "image/svg+xml": {"schema": {"type": "string"}},
    "application/javascript": {"schema": {"type": "string"}}}}
_SUBSCRIBE_PARAMS = [
    _q("topic", r"^(blocks|txs|events|jobs)$", "what to follow", required=True),
    _q("from", _HEIGHT, "resume after a reconnect: replay from this height (no gap, no duplicate)"),
    _q("sender", _ADDRESS, "txs: only transactions of this sender"),
    _q("hash", _HASH, "txs: only this transaction"),
    _q("actor", _ADDRESS, "events: only events of this emitter (required for events)"),
    _q("name", None, "events: only events of this topic name"),
    _q("job", _HASH, "jobs: only this job"),
]


def _paths() -> dict[str, dict[str, Schema]]:
    limit = _q("limit", _LIMIT, "1..1000")
    return {
        "/openapi.json": {"get": _op("Get contract: this document", _ok({"type": "object"}), {})},
        "/submit": {"post": _op("Submit transaction: raw tx_bytes or {tx: hex}", _ok(_obj(
            {"tx_hash": _HASH_STR, "status": {"const": "pending"}})),
            {400: _ADMISSION, 413: ("body_too_large",), 417: ("expectation_failed",), 503: ("shutting_down",)},
            body=_SUBMIT_BODY, links=_TX_LINKS)},
        "/submit/batch": {"post": _op("Submit transactions: concatenated tx_bytes or {txs: [hex]}", _ok(_obj(
            {"results": {"type": "array", "minItems": 1, "items": {"oneOf": [
                _obj({"tx_hash": _HASH_STR, "status": {"const": "pending"}}),
                _obj({"error": _obj({"code": {"enum": _BATCH_ITEM_CODES}, "message": {"type": "string"}})})]}}})),
            {400: ("invalid_body",), 413: ("body_too_large", "batch_too_large"), 417: ("expectation_failed",),
             503: ("shutting_down",)},
            body=_SUBMIT_BATCH_BODY)},
        "/health": {"get": _op("Get health", _ok(_HEALTH), {}, extra={503: _ok(_HEALTH, "unhealthy")})},
        "/status": {"get": _op("Get status", _ok(_obj({"chain_id": {"type": "string"}, "height": _UINT,
                                                      "hash": _HASH_STR, "state_root": _HASH_STR})), {})},
        "/height": {"get": _op("Get height", _ok(_obj({"height": _UINT})), {})},
        "/block/{height}": {"get": _op("Get block", _ok(_BLOCK), {400: ("invalid_height",), 404: ("not_found",),
                                                                  410: ("pruned",)},
                                       params=[_p("height", "path", _HEIGHT)])},
        "/tx/{hash}": {"get": _op("Get transaction", _ok(_TX), {400: ("invalid_hash",), 404: ("not_found",),
                                                                410: ("pruned",)},
                                  params=[_HASH_PATH])},
        "/tx/{hash}/receipt": {"get": _op("Get receipt", _ok(_RECEIPT), {400: ("invalid_hash",), 404: ("not_found",),
                                                                         410: ("pruned",)},
                                          params=[_HASH_PATH])},
        "/account/{address}": {"get": _op("Get account: balance and nonces; proof=true adds a verifiable proof",
                                          _ok(_ACCOUNT), {400: ("invalid_address", "invalid_query"),
                                                          501: ("not_implemented",)},
                                          params=[_ADDR_PATH, _q("proof", r"^(true|false)$")])},
        "/state/proof": {"get": _op("Get state proof: a raw key against the head's certified state root",
                                    _ok(_STATE_PROOF), {400: ("invalid_key",)},
                                    params=[_q("key", _HEX, "raw state key, 1..1024 bytes", required=True)])},
        "/actor/read": {"post": _op("Read actor: a read-only handler call", _ok(_obj(
            {"result": _NULL_HEX, "error": {"type": ["string", "null"]}, "cycles_used": _UINT, "height": _UINT})),
            {400: ("invalid_body", "invalid_address", "invalid_handler", "invalid_payload", "invalid_cycles_limit"),
             404: ("actor_not_found",), 413: ("body_too_large",), 429: _POOL_429, 503: _POOL_503},
            body=_READ_BODY)},
        "/actor/{address}": {"get": _op("Get actor", _ok(_obj({"address": _ADDR_STR, "handlers": {"type": "array"},
                                                              "height": _UINT})), _ACTOR_ERR, params=[_ADDR_PATH])},
        "/actor/{address}/state": {"get": _op(
            "Get actor state: one key (proof=true adds a verifiable proof) or a prefix scan", _ok(_ACTOR_STATE),
            {400: ("invalid_address", "invalid_key", "invalid_prefix", "invalid_limit", "invalid_query"),
             404: ("actor_not_found",), 501: ("not_implemented",)},
            params=[_ADDR_PATH, _q("key", _HEX), _q("prefix", _HEX), limit, _q("proof", r"^(true|false)$")])},
        "/actor/{address}/timers": {"get": _op("Get actor timers", _ok(_obj(
            {"address": _ADDR_STR, "timers": {"type": "array"}, "cip1": {"type": "object"}, "height": _UINT})),
            {400: ("invalid_address", "invalid_cursor", "invalid_query"), 404: ("actor_not_found",)},
            params=[_ADDR_PATH, _q("cip1_after", _HASH)])},
        "/actor/{address}/timers/history": {"get": _op("Get timer history", _ok(_obj(
            {"address": _ADDR_STR, "terminal": {"type": "array"}, "height": _UINT})),
            {400: ("invalid_address", "invalid_limit"), 501: ("not_implemented",)},
            params=[_ADDR_PATH, _q("limit", _LIMIT, "1..200")])},
        "/simulate": {"post": _op("Simulate: a dry run of a call or deployment", _ok(_obj(
            {"status": {"enum": ["success", "failed"]}, "cycles_used": _UINT, "height": _UINT})),
            {400: ("invalid_body", "invalid_address", "invalid_handler", "invalid_instruction",
                   "invalid_cycles_limit", "invalid_cells_limit", "cells_limit_too_high", "tx_too_large"),
             413: ("body_too_large",), 429: _POOL_429, 501: ("not_implemented",), 503: _POOL_503},
            body=_SIMULATE_BODY)},
        "/events": {"get": _op("Get events: a page of an actor's events", _ok(_obj(
            {"events": {"type": "array"}, "height": _UINT, "next": {"type": ["string", "null"]}})),
            {400: ("invalid_query", "invalid_address", "invalid_topic", "invalid_height", "invalid_range",
                   "invalid_limit", "invalid_cursor"), 501: ("not_implemented",)},
            params=[_q("actor", _ADDRESS, required=True), _q("topic"), _q("from", _HEIGHT), _q("to", _HEIGHT),
                    _q("limit", _LIMIT), _q("cursor", r"^[0-9]{1,20}:[0-9]{1,10}$")])},
        "/params": {"get": _op("Get params", _ok(_obj({"height": _UINT})), _NO_RUNNERS)},
        "/runners/active": {"get": _op("Get active runners", _ok(_obj({"runners": {"type": "array"},
                                                                      "truncated": {"type": "boolean"}})),
                                       {400: ("invalid_offset", "invalid_limit"), **_NO_RUNNERS},
                                       params=[_q("offset", r"^[0-9]{1,10}$"), limit])},
        "/runner/{address}": {"get": _op("Get runner", _ok({"type": "object"}),
                                         {400: ("invalid_address",), 404: ("runner_not_found",), **_NO_RUNNERS},
                                         params=[_ADDR_PATH])},
        "/runner/{address}/jobs": {"get": _op("Get runner jobs: the poll fallback", _ok(_obj(
            {"runner": _ADDR_STR, "jobs": {"type": "array"}, "truncated": {"type": "boolean"}})),
            {400: ("invalid_address", "invalid_limit", "invalid_job_id"), 404: ("runner_not_found",),
             410: ("poll_disabled",), 501: ("not_implemented",)},
            params=[_ADDR_PATH, limit, _q("after", _HASH)])},
        "/job/{id}": {"get": _op("Get job", _ok(_obj({"job_id": _HASH_STR, "status": {"type": "string"}})),
                                 {400: ("invalid_job_id",), 404: ("job_not_found",), 501: ("not_implemented",)},
                                 params=[_JOB_PATH])},
        "/job/{id}/status": {"get": _op("Get job status", _ok(_obj({"job_id": _HASH_STR,
                                                                   "status": {"type": "string"}})),
                                        {400: ("invalid_job_id",), 404: ("job_not_found",),
                                         501: ("not_implemented",)}, params=[_JOB_PATH])},
        "/job/{id}/results": {"get": _op("Get job results", _ok(_obj({"job_id": _HASH_STR,
                                                                     "reveals": {"type": "array"}})),
                                         {400: ("invalid_job_id",), 404: ("job_not_found",),
                                          501: ("not_implemented",)}, params=[_JOB_PATH])},
        "/validators": {"get": _op("Get validators", _ok(_obj({"validators": {"type": "array"}})),
                                   {501: ("not_implemented",)})},
        "/consensus/evidence": {"get": _op("Get evidence", _ok(_obj({"evidence": {"type": "array"}})),
                                           {400: ("invalid_limit",), 501: ("not_implemented",)}, params=[limit])},
        "/subscribe": {"get": _op(
            "Subscribe: a WebSocket stream of one topic (docs/api.md, Subscriptions)", None,
            {400: ("invalid_query", "invalid_topic", "invalid_height", "invalid_address", "invalid_hash",
                   "not_websocket"),
             501: ("not_implemented",), 503: ("too_many_subscriptions", "shutting_down")},
            params=_SUBSCRIBE_PARAMS,
            extra={101: {"description": "switching to the WebSocket protocol; then JSON text messages"}})},
        "/ui": {"get": _op("Get UI page", _HTML, {500: ("ui_unavailable",)})},
        "/ui/": {"get": _op("Get UI page slash", _HTML, {500: ("ui_unavailable",)})},
        "/ui/static/{name}": {"get": _op("Get UI asset", _ASSET, {404: ("not_found",), 500: ("ui_unavailable",)},
                                         params=[_p("name", "path", r"^[A-Za-z0-9._-]{1,64}$")])},
        "/ui/snapshot": {"get": _op("Get UI snapshot", _ok({"type": "object"}), {400: ("invalid_query",)})},
    }


_DESCRIPTION = (
    "The Cowboy node's HTTP API (docs/api.md). Every response is JSON except the network page (/ui...); "
    "every error is {code, message} with a stable code. Any route may also answer 405 method_not_allowed "
    "(with Allow) to another method. Before any route runs, the connection layer may answer 400 "
    "header_too_large / bad_request, 408 header_timeout or 503 too_many_connections, and close the connection."
)


def _document() -> Schema:
    paths = _paths()
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "Cowboy node HTTP API", "version": "1", "description": _DESCRIPTION},
        "paths": paths,
        "components": {"schemas": {"Error": {
            "type": "object", "required": ["code", "message"],
            "properties": {"code": {"type": "string", "pattern": "^[a-z0-9_]+$"}, "message": {"type": "string"}}}}},
    }


_CONTRACT = _document()


def contract() -> Schema:
    """A copy of the whole document (callers may change their copy)."""
    return copy.deepcopy(_CONTRACT)


def operations() -> set[tuple[str, str]]:
    """``(METHOD, path template)`` of every operation in the contract."""
    return {(method.upper(), path) for path, item in _CONTRACT["paths"].items() for method in item}
