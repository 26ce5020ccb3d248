"""``POST /submit/batch``: many signed transactions in one request, each admitted as ``POST /submit`` would.

Why: a transfer costs a validator about one signature recovery, but a request costs the Python HTTP stack
several times that (issue 33 §1 measured 63 µs of aiohttp per transfer on a 4-validator network against 68 µs
of recovery). A client that sends many transactions — a wallet backend, an exchange, a load generator — pays
the request once per batch instead.

The body is framed, not parsed: ``tx_bytes`` is ``u32_be(len(body)) ‖ body``, so a batch is the concatenation
of its transactions' ``tx_bytes`` (``application/octet-stream``), or JSON ``{"txs": ["0x..", ...]}``. A body
that does not split into whole transactions, or holds more than ``[rpc] max_submit_batch`` of them, is refused
as a whole and admits nothing; otherwise every transaction gets its own answer, in order, exactly the one
``POST /submit`` would have given it then (a later transaction of the same sender sees the earlier ones).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.params import parse_hex

DEFAULT_MAX_SUBMIT_BATCH = 1000
"""Most transactions one ``POST /submit/batch`` may carry (``[rpc] max_submit_batch``)."""

LENGTH_PREFIX = 4
"""Bytes of the big-endian length in front of every transaction's body (``tx_bytes``)."""

BatchSubmit = Callable[[list[bytes]], Awaitable[list[dict[str, Any]]]]
"""Admit transactions in order; one answer each (``{"tx_hash", "status"}`` or ``{"error": {code, message}}``)."""


def split_tx_stream(body: bytes, max_txs: int) -> list[bytes]:
    """``body`` cut into its transactions' ``tx_bytes`` (each with its own length prefix).

    Raises RpcError 400 ``invalid_body`` when the body is empty or its last transaction is cut short, and 413
    ``batch_too_large`` past ``max_txs`` transactions (counted before any is admitted). The bodies themselves are
    not looked at: a zero-length or undecodable one is admission's to refuse, as on ``POST /submit``.
    """
    if not body:
        raise RpcError(400, "invalid_body", "body is empty; expected one or more tx_bytes")
    out: list[bytes] = []
    at, end = 0, len(body)
    while at < end:
        # Fewer than 4 bytes left reads as a short length whose end is past the body's: the same refusal.
        size = int.from_bytes(body[at:at + LENGTH_PREFIX], "big")
        stop = at + LENGTH_PREFIX + size
        if stop > end:
            raise RpcError(400, "invalid_body", f"transaction {len(out)} at byte {at} is cut short: its 4-byte length "
                                                f"and body run {stop - end} bytes past the end of the body")
        if len(out) == max_txs:
            raise RpcError(413, "batch_too_large", f"more than {max_txs} transactions in one batch "
                                                   "([rpc] max_submit_batch)")
        out.append(body[at:stop])
        at = stop
    return out


def parse_json_batch(body: bytes, max_txs: int) -> list[bytes]:
    """``{"txs": ["0x<hex of tx_bytes>", ...]}`` (``0x`` optional), each item whole ``tx_bytes``; same errors as
    :func:`split_tx_stream`, plus 400 ``invalid_body`` for anything but a non-empty list of hex strings."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RpcError(400, "invalid_body", "body is not valid JSON") from None
    txs = doc.get("txs") if isinstance(doc, dict) else None
    if not isinstance(txs, list) or not txs or not all(isinstance(x, str) for x in txs):
        raise RpcError(400, "invalid_body", 'JSON body must be an object {"txs": ["0x<hex of tx_bytes>", ...]} '
                                            "with at least one transaction")
    if len(txs) > max_txs:
        raise RpcError(413, "batch_too_large", f"{len(txs)} transactions in one batch; at most {max_txs} "
                                               "([rpc] max_submit_batch)")
    return [parse_hex(x, param=f"txs[{i}]", code="invalid_body") for i, x in enumerate(txs)]


async def handle_submit_batch(request: web.Request, body: bytes, max_txs: int,
                              submit_one: Callable[[bytes], Awaitable[dict[str, Any]]],
                              submit_many: BatchSubmit | None) -> web.Response:
    """The route's work once the body is read (``server.py`` reads it within ``max_body_bytes``).

    ``submit_many`` is the facade's batch admission when it has one (signers recovered as one batch);
    otherwise each transaction goes through ``submit_one`` in turn.
    """
    ctype = request.content_type.lower()
    if ctype == "application/json":
        txs = parse_json_batch(body, max_txs)
    elif ctype == "application/octet-stream":
        txs = split_tx_stream(body, max_txs)
    else:
        raise RpcError(400, "invalid_body", "Content-Type must be application/octet-stream (concatenated "
                                            "tx_bytes) or application/json")
    if submit_many is not None:
        results = await submit_many(txs)
    else:
        results = []
        for raw in txs:
            try:
                results.append(await submit_one(raw))
            except RpcError as e:
                if e.status == 503 and not results:  # stopping before anything was admitted: as /submit
                    raise
                results.append(item_error(e))
    return web.json_response({"results": results})


def item_error(e: RpcError) -> dict[str, Any]:
    """One transaction's refusal inside a batch answer: the error body ``POST /submit`` would have sent."""
    return {"error": {"code": e.code, "message": e.message}}
