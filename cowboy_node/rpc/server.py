"""The HTTP API (aiohttp) over a :class:`~cowboy_node.rpc.facade.NodeFacade`.

Every response is JSON. Errors are always ``{"code": ..., "message": ...}``
with a stable ``code``; see ``docs/api.md`` for the full route list.

The server calls only the facade: it parses and validates path/query/body
input, maps facade results to responses and facade :class:`RpcError` to
error responses, and turns anything unexpected into a generic 500.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import HttpVersion11, web

from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.rpc.conn_limits import ConnLimits, LimitedAppRunner, fit_to_descriptors
from cowboy_node.rpc.consensus_routes import add_consensus_routes
from cowboy_node.rpc.facade import NodeFacade, RpcError
from cowboy_node.rpc.job_routes import add_job_routes
from cowboy_node.rpc.json_body import check_json_body
from cowboy_node.rpc.openapi import contract
from cowboy_node.rpc.params import (
    FACADE_KEY,
    off_loop,
    parse_address_param,
    parse_hash,
    parse_height,
    parse_hex,
    parse_limit,
)
from cowboy_node.rpc.pruned_reads import unknown_tx_error
from cowboy_node.rpc.read_pool import ReadPool
from cowboy_node.rpc.runner_routes import add_runner_routes
from cowboy_node.rpc.simulate_routes import add_workflow_routes
from cowboy_node.rpc.submit_batch import DEFAULT_MAX_SUBMIT_BATCH, handle_submit_batch
from cowboy_node.rpc.subscriptions import SubscriptionHub, add_subscription_routes
from cowboy_node.rpc.ui_routes import UiConfig, add_ui_routes
from cowboy_node.rpc.verified import VerifiedFacade
from cowboy_node.state.derived import DERIVED_PREFIXES, is_derived
from cowboy_protocol.crypto.address import to_checksum_address

log = structlog.get_logger("cowboy.rpc")

DEFAULT_MAX_BODY_BYTES = 1_048_576
"""Largest request body accepted (bytes); larger bodies get 413 ``body_too_large``."""
MAX_STATE_KEY_BYTES = 1024
"""Longest raw state key ``/state/proof`` accepts."""
DEFAULT_SCAN_LIMIT = 100
"""Entries ``/actor/{address}/state?prefix=`` returns when ``limit`` is not given."""
DEFAULT_READ_CYCLES = 1_000_000
"""Cycles limit of ``POST /actor/read`` when ``cycles_limit`` is not given."""
MAX_READ_CYCLES = 10_000_000
"""Largest ``cycles_limit`` of ``POST /actor/read`` (reads run in the bounded read pool, ``rpc/read_pool.py``)."""
MAX_HANDLER_BYTES = 256
"""Longest handler name (UTF-8 bytes), as for CallActor."""
_READ_FIELDS = frozenset({"actor", "handler", "payload", "cycles_limit"})

_MAX_BODY_KEY: web.AppKey[int] = web.AppKey("max_body_bytes", int)
_METRICS_KEY: web.AppKey[Any] = web.AppKey("metrics")
_MAX_SUBMIT_BATCH_KEY: web.AppKey[int] = web.AppKey("max_submit_batch", int)
READ_POOL_KEY: web.AppKey[ReadPool] = web.AppKey("read_pool", ReadPool)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> web.Response:
    """A JSON error body with the given HTTP status (``details``: further fields, never ``code``/``message``)."""
    return web.json_response({**(details or {}), "code": code, "message": message}, status=status)


# -- input parsing -------------------------------------------------------------------
# -- handlers ------------------------------------------------------------------------
def _facade(request: web.Request) -> NodeFacade:
    return request.app[FACADE_KEY]


def _actor_found(doc: dict[str, Any] | None, address: bytes) -> dict[str, Any]:
    if doc is None:

        raise RpcError(404, "actor_not_found", f"no actor is deployed at {to_checksum_address(address)}")
    return doc


async def _read_body(request: web.Request) -> bytes:
    """The whole body, within ``max_body_bytes``; a JSON body is also checked by
    :func:`~cowboy_node.rpc.json_body.check_json_body` (UTF-8, nesting depth) so ``json.loads`` can't recurse deeply."""
    limit = request.app[_MAX_BODY_KEY]
    if request.content_length is not None and request.content_length > limit:
        raise RpcError(413, "body_too_large", f"request body exceeds {limit} bytes")
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RpcError(413, "body_too_large", f"request body exceeds {limit} bytes") from None
    if request.content_type.lower() == "application/json":
        check_json_body(body)
    return body


async def handle_submit(request: web.Request) -> web.Response:
    """``POST /submit``: raw ``tx_bytes`` (octet-stream) or JSON ``{"tx": "0x.."}``."""
    body = await _read_body(request)
    ctype = request.content_type.lower()
    if ctype == "application/json":
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise RpcError(400, "invalid_body", "body is not valid JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("tx"), str):
            raise RpcError(400, "invalid_body", 'JSON body must be an object {"tx": "0x<hex of tx_bytes>"}')
        tx_bytes = parse_hex(doc["tx"], param="tx", code="invalid_body")
    elif ctype == "application/octet-stream":
        tx_bytes = body
        if not tx_bytes:
            raise RpcError(400, "invalid_body", "body is empty; expected tx_bytes")
    else:
        raise RpcError(400, "invalid_body",
                       "Content-Type must be application/octet-stream (raw tx_bytes) or application/json")
    return web.json_response(await _submit_one(request)(tx_bytes))


def _submit_one(request: web.Request) -> Callable[[bytes], Awaitable[dict[str, Any]]]:
    """The facade's admission of one transaction. A node with a signature pool recovers the signer off the event
    loop (``chain/signature_pool.py``); same answers."""
    facade = _facade(request)
    submit_async = getattr(facade, "submit_transaction_async", None)
    if submit_async is not None:
        return submit_async  # type: ignore[no-any-return]

    async def submit(tx_bytes: bytes) -> dict[str, Any]:
        return facade.submit_transaction(tx_bytes)

    return submit


async def handle_submit_batch_route(request: web.Request) -> web.Response:
    """``POST /submit/batch``: concatenated ``tx_bytes`` (octet-stream) or JSON ``{"txs": [..]}``
    (``rpc/submit_batch.py``)."""
    body = await _read_body(request)
    return await handle_submit_batch(request, body, request.app[_MAX_SUBMIT_BATCH_KEY], _submit_one(request),
                                     getattr(_facade(request), "submit_batch_async", None))


_CONTRACT_BODY = json.dumps(contract(), separators=(",", ":"), sort_keys=True).encode()


async def handle_openapi(request: web.Request) -> web.Response:
    """``GET /openapi.json``: the OpenAPI 3.1 contract of every route (``rpc/openapi.py``)."""
    return web.Response(body=_CONTRACT_BODY, content_type="application/json")


async def handle_health(request: web.Request) -> web.Response:
    """``GET /health``: 200 when healthy, else 503, with the facade's JSON either way."""
    h = _facade(request).health()
    return web.json_response(h, status=200 if h.get("ok") else 503)


async def handle_status(request: web.Request) -> web.Response:
    """``GET /status``."""
    return web.json_response(_facade(request).status())


async def handle_height(request: web.Request) -> web.Response:
    """``GET /height``."""
    return web.json_response({"height": _facade(request).height()})


async def handle_block(request: web.Request) -> web.Response:
    """``GET /block/{height}``."""
    height = parse_height(request.match_info["height"])
    block = _facade(request).block(height)
    if block is None:
        raise RpcError(404, "not_found", f"no block at height {height}")
    return web.json_response(block)


async def handle_tx(request: web.Request) -> web.Response:
    """``GET /tx/{hash}``."""
    tx_hash = parse_hash(request.match_info["hash"])
    facade = _facade(request)
    tx = facade.transaction(tx_hash)
    if tx is None:
        raise unknown_tx_error(facade, tx_hash, "transaction")  # 410 pruned once blocks are gone (issue 34)
    return web.json_response(tx)


async def handle_receipt(request: web.Request) -> web.Response:
    """``GET /tx/{hash}/receipt``."""
    tx_hash = parse_hash(request.match_info["hash"])
    facade = _facade(request)
    receipt = facade.receipt(tx_hash)
    if receipt is None:
        if facade.transaction(tx_hash) is not None:  # pending or evicted: not committed, whatever was pruned
            raise RpcError(404, "not_found", f"no receipt for transaction 0x{tx_hash.hex()} (not committed)")
        raise unknown_tx_error(facade, tx_hash, "receipt")
    return web.json_response(receipt)


def _proof_flag(request: web.Request) -> bool:
    """``proof=true`` asks for a verified read (``rpc/verified.py``); 501 on a facade without proofs."""
    text = request.query.get("proof")
    if text is None or text == "false":
        return False
    if text != "true":
        raise RpcError(400, "invalid_query", "proof must be true or false")
    if not isinstance(_facade(request), VerifiedFacade):
        raise RpcError(501, "not_implemented", "this node does not serve verified reads")
    return True


async def handle_account(request: web.Request) -> web.Response:
    """``GET /account/{address}[?proof=true]``."""
    address = parse_address_param(request.match_info["address"])
    facade = _facade(request)
    if _proof_flag(request):
        assert isinstance(facade, VerifiedFacade)
        return web.json_response(await off_loop(facade.account_proof, address))
    return web.json_response(facade.account(address))


async def handle_state_proof(request: web.Request) -> web.Response:
    """``GET /state/proof?key=0x..``."""
    text = request.query.get("key")
    if text is None:
        raise RpcError(400, "invalid_key", "query parameter key is required (0x-prefixed hex)")
    key = parse_hex(text, param="key", code="invalid_key", max_bytes=MAX_STATE_KEY_BYTES)
    if is_derived(key):  # stored but not in the tree: an exclusion proof would say the key is absent
        under = " and ".join(p.decode() for p in DERIVED_PREFIXES)
        raise RpcError(400, "derived_key", f"keys under {under} are indexes the state root does not commit to "
                                           "(docs/timers.md §2); prove the timer's timer/h/ entry instead")
    return web.json_response(_facade(request).state_proof(key))


async def handle_actor(request: web.Request) -> web.Response:
    """``GET /actor/{address}``."""
    address = parse_address_param(request.match_info["address"])
    return web.json_response(_actor_found(await off_loop(_facade(request).actor, address), address))


async def handle_actor_state(request: web.Request) -> web.Response:
    """``GET /actor/{address}/state?key=0x..`` (one value) or ``?prefix=0x..&limit=N`` (ordered scan)."""
    address = parse_address_param(request.match_info["address"])
    q = request.query
    key_text, prefix_text, limit_text = q.get("key"), q.get("prefix"), q.get("limit")
    facade = _facade(request)
    with_proof = _proof_flag(request)
    if key_text is not None:
        if prefix_text is not None or limit_text is not None:
            raise RpcError(400, "invalid_query", "give either key, or prefix (and limit), not both")
        key = parse_hex(key_text, param="key", code="invalid_key", max_bytes=MAX_STATE_KEY_BYTES)
        if with_proof:
            assert isinstance(facade, VerifiedFacade)
            doc = await off_loop(facade.actor_state_proof, address, key)
        else:
            doc = await off_loop(facade.actor_state, address, key)
    elif with_proof:
        raise RpcError(400, "invalid_query", "proof=true needs key (a prefix scan has no proof)")
    else:
        prefix = parse_hex(prefix_text or "", param="prefix", code="invalid_prefix", max_bytes=MAX_STATE_KEY_BYTES,
                           allow_empty=True)
        limit = DEFAULT_SCAN_LIMIT if limit_text is None else parse_limit(limit_text)
        doc = await off_loop(facade.actor_state_scan, address, prefix, limit)
    return web.json_response(_actor_found(doc, address))


async def handle_actor_timers(request: web.Request) -> web.Response:
    """``GET /actor/{address}/timers[?cip1_after=0x<timer id>]`` (``cip1_after``: the ``cip1.next`` of the
    previous page of CIP-1 timers)."""
    address = parse_address_param(request.match_info["address"])
    unknown = sorted(set(request.query) - {"cip1_after"})
    if unknown:
        raise RpcError(400, "invalid_query", f"unknown parameters {unknown}; expected ['cip1_after']")
    after_text = request.query.get("cip1_after")
    after = None
    if after_text is not None:
        after = parse_hex(after_text, param="cip1_after", code="invalid_cursor", max_bytes=32)
        if len(after) != 32:
            raise RpcError(400, "invalid_cursor", "cip1_after must be a 32-byte timer id (cip1.next)")
    doc = await off_loop(_facade(request).actor_timers, address, after)
    return web.json_response(_actor_found(doc, address))


def _read_request(doc: object) -> tuple[bytes, str, bytes, int]:
    """Validate the ``/actor/read`` body: ``{"actor", "handler", "payload"?, "cycles_limit"?}``."""
    if not isinstance(doc, dict):
        raise RpcError(400, "invalid_body", "body must be a JSON object {actor, handler, payload?, cycles_limit?}")
    unknown = sorted(str(k) for k in doc if k not in _READ_FIELDS)
    if unknown:
        raise RpcError(400, "invalid_body", f"unknown fields {unknown}; expected {sorted(_READ_FIELDS)}")
    actor_text, handler = doc.get("actor"), doc.get("handler")
    if not isinstance(actor_text, str):
        raise RpcError(400, "invalid_address", "actor is required: 0x + 40 hex digits")
    actor = parse_address_param(actor_text)
    try:
        # JSON may carry lone surrogates ("\ud800"): they are not encodable, hence not a valid name.
        handler_len = len(handler.encode("utf-8")) if isinstance(handler, str) else 0
    except UnicodeEncodeError:
        handler_len = 0
    if not 0 < handler_len <= MAX_HANDLER_BYTES:
        raise RpcError(400, "invalid_handler", f"handler is required: a name of 1..{MAX_HANDLER_BYTES} UTF-8 bytes")
    assert isinstance(handler, str)
    payload_text = doc.get("payload", "")
    if not isinstance(payload_text, str):
        raise RpcError(400, "invalid_payload", "payload must be a hex string")
    payload = parse_hex(payload_text, param="payload", code="invalid_payload", allow_empty=True)
    cycles = doc.get("cycles_limit", DEFAULT_READ_CYCLES)
    if isinstance(cycles, bool) or not isinstance(cycles, int) or not 1 <= cycles <= MAX_READ_CYCLES:
        raise RpcError(400, "invalid_cycles_limit", f"cycles_limit must be an integer in 1..{MAX_READ_CYCLES}")
    return actor, handler, payload, cycles


async def handle_actor_read(request: web.Request) -> web.Response:
    """``POST /actor/read``: a read-only handler call on the head state (JSON in, JSON out)."""
    body = await _read_body(request)
    if request.content_type.lower() != "application/json":
        raise RpcError(400, "invalid_body", "Content-Type must be application/json")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RpcError(400, "invalid_body", "body is not valid JSON") from None
    actor, handler, payload, cycles = _read_request(doc)
    facade = _facade(request)
    # The bounded read pool (429/503 with Retry-After when over its limits); its watchdog interrupts the call.
    result = await request.app[READ_POOL_KEY].submit(
        request.remote or "unknown",
        lambda interrupt: facade.read_actor(actor, handler, payload, cycles, interrupt=interrupt))
    return web.json_response(_actor_found(result, actor))


# -- middleware ----------------------------------------------------------------------
def _route_label(request: web.Request) -> str:
    resource = request.match_info.route.resource
    if resource is None:
        return "unmatched"
    return resource.canonical


@web.middleware
async def _middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    response: web.StreamResponse
    try:
        response = await handler(request)
    except RpcError as e:
        response = error_response(e.status, e.code, e.message, e.details)
        if e.retry_after is not None:
            response.headers["Retry-After"] = str(e.retry_after)
    except web.HTTPMethodNotAllowed as e:
        allowed = ", ".join(sorted(e.allowed_methods))
        response = error_response(405, "method_not_allowed",
                                  f"method {request.method} is not allowed on {request.path}; allowed: {allowed}")
        response.headers["Allow"] = ",".join(sorted(e.allowed_methods))
    except web.HTTPNotFound:
        response = error_response(404, "not_found", f"no route {request.method} {request.path}")
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[_MAX_BODY_KEY]
        response = error_response(413, "body_too_large", f"request body exceeds {limit} bytes")
    except web.HTTPException as e:
        code = (e.reason or "http_error").lower().replace(" ", "_").replace("-", "_")
        response = error_response(e.status, code, e.text or e.reason or "")
    except Exception:
        log.exception("rpc handler failed", method=request.method, path=request.path,
                      route=_route_label(request))
        response = error_response(500, "internal_error", "internal server error")
    _count(request, response)
    return response


def _count(request: web.Request, response: web.StreamResponse) -> None:
    metrics = request.app[_METRICS_KEY]
    counter = getattr(metrics, "rpc_requests", None) if metrics is not None else None
    if counter is not None:
        try:
            counter.labels(route=_route_label(request), status=str(response.status)).inc()
        except Exception:  # metrics must never break a response
            log.exception("rpc metrics update failed")


async def _submit_expect_handler(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue``: refuse an oversized body before the client sends it."""
    limit = request.app[_MAX_BODY_KEY]
    response: web.StreamResponse
    if request.content_length is not None and request.content_length > limit:
        response = error_response(413, "body_too_large", f"request body exceeds {limit} bytes")
    elif request.headers.get("Expect", "").lower() != "100-continue":
        response = error_response(417, "expectation_failed", "only Expect: 100-continue is supported")
    else:
        if request.version == HttpVersion11:
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0
        return None
    _count(request, response)
    return response


def build_app(facade: NodeFacade, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              metrics: object | None = None, read_pool: ReadPool | None = None,
              ui: UiConfig | None = None, subscriptions: SubscriptionHub | None = None,
              max_submit_batch: int = DEFAULT_MAX_SUBMIT_BATCH) -> web.Application:
    """The aiohttp application serving ``facade``.

    ``subscriptions`` serves ``GET /subscribe`` (without one, the route answers 501 ``not_implemented``).

    ``read_pool`` runs ``POST /actor/read`` (default: a :class:`ReadPool` with the default limits); the app
    closes it on cleanup.
    """
    if max_body_bytes < 1:
        raise ValueError("max_body_bytes must be positive")
    if max_submit_batch < 1:
        raise ValueError("max_submit_batch must be positive")
    app = web.Application(client_max_size=max_body_bytes, middlewares=[_middleware])
    app[FACADE_KEY] = facade
    app[_MAX_BODY_KEY] = max_body_bytes
    app[_MAX_SUBMIT_BATCH_KEY] = max_submit_batch
    app[_METRICS_KEY] = metrics
    if read_pool is None:

        read_pool = ReadPool(metrics=metrics if isinstance(metrics, NodeMetrics) else None)
    app[READ_POOL_KEY] = read_pool

    async def close_read_pool(_: web.Application) -> None:
        await read_pool.aclose()

    app.on_cleanup.append(close_read_pool)
    r = app.router
    r.add_get("/openapi.json", handle_openapi, allow_head=False)
    r.add_post("/submit", handle_submit, expect_handler=_submit_expect_handler)
    r.add_post("/submit/batch", handle_submit_batch_route, expect_handler=_submit_expect_handler)
    r.add_get("/health", handle_health, allow_head=False)
    r.add_get("/status", handle_status, allow_head=False)
    r.add_get("/height", handle_height, allow_head=False)
    r.add_get("/block/{height}", handle_block, allow_head=False)
    r.add_get("/tx/{hash}", handle_tx, allow_head=False)
    r.add_get("/tx/{hash}/receipt", handle_receipt, allow_head=False)
    r.add_get("/account/{address}", handle_account, allow_head=False)
    r.add_get("/state/proof", handle_state_proof, allow_head=False)
    r.add_post("/actor/read", handle_actor_read)
    # "read" is not an address: without the lookahead GET /actor/read would be GET /actor/{address} (400), and a
    # 405 on /actor/read would advertise GET in its Allow header (found by schemathesis, allow_header_conformance).
    r.add_get("/actor/{address:(?!read$)[^{}/]+}", handle_actor, allow_head=False)
    r.add_get("/actor/{address}/state", handle_actor_state, allow_head=False)
    r.add_get("/actor/{address}/timers", handle_actor_timers, allow_head=False)
    add_runner_routes(r)
    add_job_routes(r)
    add_workflow_routes(r, READ_POOL_KEY)  # POST /simulate, GET /events, GET /actor/{address}/timers/history
    add_consensus_routes(r)
    add_ui_routes(app, read_pool, ui)
    add_subscription_routes(app, subscriptions)
    return app


async def start_rpc_server(facade: NodeFacade, host: str, port: int, *,
                           max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                           metrics: object | None = None, conn_limits: ConnLimits | None = None,
                           read_pool: ReadPool | None = None, ui: UiConfig | None = None,
                           subscriptions: SubscriptionHub | None = None,
                           max_submit_batch: int = DEFAULT_MAX_SUBMIT_BATCH) -> web.AppRunner:
    """Start serving on ``host:port``; the caller stops it with ``await runner.cleanup()``.

    Connections obey ``conn_limits`` (default :class:`ConnLimits`), with the global cap fitted to the open-file
    limit (:func:`~cowboy_node.rpc.conn_limits.fit_to_descriptors`; DescriptorLimitError, an OSError, when the
    limit leaves nothing after the reserve).
    """
    limits = fit_to_descriptors(conn_limits if conn_limits is not None else ConnLimits())
    app = build_app(facade, max_body_bytes=max_body_bytes, metrics=metrics, read_pool=read_pool, ui=ui,
                    subscriptions=subscriptions, max_submit_batch=max_submit_batch)
    runner = LimitedAppRunner(app, limits=limits, metrics=metrics, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    log.info("rpc server listening", host=host, port=port)
    return runner
