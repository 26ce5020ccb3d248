"""The typed client of the node API, used by the ``cowboy-node`` CLI and the runner.

One method per contract operation the project calls (``cowboy_protocol/api_types.py``: :data:`OPERATIONS` names
each method's operation; every URL is built from that table's path template, never by hand), each returning the
TypedDict of that operation's 200 schema. An error answer is an :class:`ApiError` carrying the contract's JSON
``code``; an unreachable node is :class:`NodeUnreachable`.

Built on :mod:`urllib.request`, synchronous (the runner calls it from a thread); connects directly (environment
proxies are ignored: the node API is normally on localhost or a private network).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from cowboy_protocol import api_types as t
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.verified_reads import (
    ACCOUNT_PREFIX,
    CertifiedHeader,
    ValueMismatch,
    actor_state_key,
    decode_account,
    verify_read,
)

DEFAULT_RPC_URL = "http://127.0.0.1:4000"
DEFAULT_TIMEOUT_S = 10.0
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class ApiError(Exception):
    """The node answered with an error: ``{"code", "message"}`` and an HTTP ``status``."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


class NodeUnreachable(Exception):
    """The node could not be reached (connection refused, DNS failure, timeout...)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach node at {url}: {reason}")
        self.url = url
        self.reason = reason


def normalize_url(url: str) -> str:
    """Validate an ``http(s)://host[:port][/prefix]`` base URL; strip a trailing slash. Raises ValueError."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
        raise ValueError(f"expected an http:// or https:// URL such as {DEFAULT_RPC_URL}, got {url!r}")
    return url.rstrip("/")


class RpcClient:
    """Synchronous client for the node's HTTP API."""

    def __init__(self, base_url: str = DEFAULT_RPC_URL, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.base_url = normalize_url(base_url)
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _request(self, method: str, path: str, body: bytes | None = None,
                 content_type: str | None = None) -> Any:
        url = self.base_url + path
        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read(MAX_RESPONSE_BYTES + 1)
                status = resp.status
        except urllib.error.HTTPError as e:
            try:
                raw = e.read(MAX_RESPONSE_BYTES + 1)
            except OSError:
                raw = b""
            finally:
                e.close()
            raise _api_error(e.code, raw) from None
        except urllib.error.URLError as e:
            reason = e.reason
            text = getattr(reason, "strerror", None) or str(reason)
            raise NodeUnreachable(self.base_url, text) from None
        except TimeoutError:
            raise NodeUnreachable(self.base_url, f"timed out after {self.timeout:g} s") from None
        except OSError as e:
            raise NodeUnreachable(self.base_url, e.strerror or str(e)) from None
        if len(raw) > MAX_RESPONSE_BYTES:
            raise ApiError("invalid_response", f"response larger than {MAX_RESPONSE_BYTES} bytes", status)
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ApiError("invalid_response", f"node returned non-JSON response (HTTP {status})", status) from None

    def _call(self, name: str, path_params: Mapping[str, str] | None = None,
              query: Mapping[str, str | int | None] | None = None, body: Any = None) -> Any:
        """Call the operation of method ``name`` (:data:`~cowboy_protocol.api_types.OPERATIONS`): its method,
        its path template filled with ``path_params`` (each percent-encoded), the ``query`` items that are not
        None, and a JSON ``body`` for a POST."""
        op = t.OPERATIONS[name]
        path = op.path
        for key, value in (path_params or {}).items():
            path = path.replace("{" + key + "}", urllib.parse.quote(value, safe=""))
        items = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if items:
            path += "?" + urllib.parse.urlencode(items)
        if op.method == "POST":
            return self._request("POST", path, json.dumps(body).encode(), "application/json")
        return self._request("GET", path)

    # -- one method per operation (api_types.OPERATIONS) ------------------------------------------------------
    def status(self) -> t.Status:
        """``GET /status``: chain id, head, basefees, block time, the validator's keys."""
        return cast(t.Status, self._call("status"))

    def height(self) -> t.Height:
        """``GET /height``."""
        return cast(t.Height, self._call("height"))

    def params(self) -> t.Params:
        """``GET /params``: governed parameters."""
        return cast(t.Params, self._call("params"))

    def account(self, address: bytes | str, *, proof: bool = False) -> t.Account:
        """``GET /account/{address}`` (``proof=true``: with a proof; :meth:`verified_account` checks it)."""
        return cast(t.Account, self._call("account", {"address": _address(address)},
                                          {"proof": "true" if proof else None}))

    def block(self, height: int | str) -> t.Block:
        """``GET /block/{height}``."""
        return cast(t.Block, self._call("block", {"height": str(height)}))

    def transaction(self, tx_hash: bytes | str) -> t.Transaction:
        """``GET /tx/{hash}``."""
        return cast(t.Transaction, self._call("transaction", {"hash": _hex(tx_hash)}))

    def receipt(self, tx_hash: bytes | str) -> t.Receipt:
        """``GET /tx/{hash}/receipt`` (404 ``not_found`` while unknown or pending)."""
        return cast(t.Receipt, self._call("receipt", {"hash": _hex(tx_hash)}))

    def submit(self, tx_bytes: bytes) -> t.Submitted:
        """``POST /submit`` with raw ``tx_bytes``; returns ``{"tx_hash", "status"}``."""
        out = self._request("POST", t.OPERATIONS["submit"].path, bytes(tx_bytes), "application/octet-stream")
        if not isinstance(out, dict):
            raise ApiError("invalid_response", "submit response is not a JSON object", 200)
        return cast(t.Submitted, out)

    def submit_batch(self, txs: Sequence[bytes]) -> t.SubmittedBatch:
        """``POST /submit/batch`` with the concatenated ``tx_bytes``; one answer per transaction, in order."""
        out = self._request("POST", t.OPERATIONS["submit_batch"].path, b"".join(bytes(x) for x in txs),
                            "application/octet-stream")
        if not isinstance(out, dict) or not isinstance(out.get("results"), list):
            raise ApiError("invalid_response", "submit_batch response is not {\"results\": [...]}", 200)
        return cast(t.SubmittedBatch, out)

    def state_proof(self, key: bytes) -> t.StateProof:
        """``GET /state/proof?key=`` (unchecked; :meth:`verified_state` checks it)."""
        return cast(t.StateProof, self._call("state_proof", query={"key": "0x" + bytes(key).hex()}))

    def actor_read(self, body: Mapping[str, Any]) -> t.ActorRead:
        """``POST /actor/read`` with ``{actor, handler, payload, cycles_limit}``."""
        return cast(t.ActorRead, self._call("actor_read", body=dict(body)))

    def actor(self, address: bytes | str) -> t.ActorInfo:
        """``GET /actor/{address}``."""
        return cast(t.ActorInfo, self._call("actor", {"address": _address(address)}))

    def actor_state(self, address: bytes | str, key: bytes, *, proof: bool = False) -> t.ActorStateEntry:
        """``GET /actor/{address}/state?key=`` (``proof=true``: :meth:`verified_actor_state` checks it)."""
        return cast(t.ActorStateEntry, self._call("actor_state", {"address": _address(address)},
                                                  {"key": "0x" + bytes(key).hex(),
                                                   "proof": "true" if proof else None}))

    def actor_state_scan(self, address: bytes | str, prefix: bytes, limit: int | None = None) -> t.ActorStateScan:
        """``GET /actor/{address}/state?prefix=[&limit=]``."""
        return cast(t.ActorStateScan, self._call("actor_state_scan", {"address": _address(address)},
                                                 {"prefix": "0x" + bytes(prefix).hex(), "limit": limit}))

    def actor_timers(self, address: bytes | str, *, cip1_after: str | None = None) -> t.ActorTimers:
        """``GET /actor/{address}/timers[?cip1_after=]``."""
        return cast(t.ActorTimers, self._call("actor_timers", {"address": _address(address)},
                                              {"cip1_after": cip1_after}))

    def timer_history(self, address: bytes | str, *, limit: int | None = None) -> t.TimerHistory:
        """``GET /actor/{address}/timers/history[?limit=]``."""
        return cast(t.TimerHistory, self._call("timer_history", {"address": _address(address)}, {"limit": limit}))

    def simulate(self, body: Mapping[str, Any]) -> t.Simulation:
        """``POST /simulate``: a dry run."""
        return cast(t.Simulation, self._call("simulate", body=dict(body)))

    def events(self, query: Mapping[str, str | int | None]) -> t.EventsPage:
        """``GET /events`` with ``actor`` and the optional ``topic``, ``from``, ``to``, ``limit``, ``cursor``."""
        return cast(t.EventsPage, self._call("events", query=query))

    def active_runners(self, *, offset: int | None = None, limit: int | None = None) -> t.ActiveRunners:
        """``GET /runners/active``."""
        return cast(t.ActiveRunners, self._call("active_runners", query={"offset": offset, "limit": limit}))

    def runner(self, address: bytes | str) -> t.Runner:
        """``GET /runner/{address}`` (404 ``runner_not_found``)."""
        return cast(t.Runner, self._call("runner", {"address": _address(address)}))

    def runner_jobs(self, address: bytes | str, *, limit: int | None = None,
                    after: bytes | None = None) -> t.RunnerJobs:
        """``GET /runner/{address}/jobs`` (the poll fallback; 410 ``poll_disabled``)."""
        return cast(t.RunnerJobs, self._call("runner_jobs", {"address": _address(address)},
                                             {"limit": limit, "after": None if after is None else "0x" + after.hex()}))

    def job(self, job_id: bytes | str) -> t.Job:
        """``GET /job/{id}``: the whole record."""
        return cast(t.Job, self._call("job", {"id": _hex(job_id)}))

    def job_status(self, job_id: bytes | str) -> t.Job:
        """``GET /job/{id}/status``."""
        return cast(t.Job, self._call("job_status", {"id": _hex(job_id)}))

    def job_results(self, job_id: bytes | str) -> t.JobResults:
        """``GET /job/{id}/results``."""
        return cast(t.JobResults, self._call("job_results", {"id": _hex(job_id)}))

    def validators(self) -> t.Validators:
        """``GET /validators``."""
        return cast(t.Validators, self._call("validators"))


    # -- verified reads (cowboy_protocol/verified_reads.py; the node is not trusted) --------------------------
    def verified_state(self, key: bytes, group_key: bytes) -> VerifiedValue:
        """``GET /state/proof?key=`` checked against ``group_key``: the raw state ``key``'s value at a certified
        head. Raises a :class:`~cowboy_protocol.verified_reads.VerificationError` (or ApiError/NodeUnreachable)."""
        doc = self._object(self.state_proof(key))
        header, value = verify_read(doc, group_key, key=bytes(key))
        if doc.get("root") != "0x" + header.state_root.hex():
            raise ValueMismatch("the answer's root is not the certified header's state root")
        return VerifiedValue(header, value)

    def verified_account(self, address: bytes, group_key: bytes) -> VerifiedAccount:
        """``GET /account/{address}?proof=true`` checked against ``group_key``; the answer's balance and nonce must
        be the proven ones (``next_pending_nonce`` is the node's mempool view: not provable, not returned)."""
        doc = self._object(self.account(bytes(address), proof=True))
        header, raw = verify_read(doc, group_key, key=ACCOUNT_PREFIX + bytes(address))
        balance, nonce = decode_account(raw)
        if doc.get("balance") != str(balance) or doc.get("nonce") != nonce:
            raise ValueMismatch("the answer's balance or nonce is not the proven account")
        return VerifiedAccount(header, balance, nonce)

    def verified_actor_state(self, actor: bytes, key: bytes, group_key: bytes) -> VerifiedValue:
        """``GET /actor/{actor}/state?key=…&proof=true`` checked against ``group_key``: the entry's proven value
        (None: unset), which the answer's ``value`` must be."""
        doc = self._object(self.actor_state(bytes(actor), key, proof=True))
        header, value = verify_read(doc, group_key, key=actor_state_key(actor, key))
        if doc.get("value") != (None if value is None else "0x" + value.hex()):
            raise ValueMismatch("the answer's value is not the proven one")
        return VerifiedValue(header, value)

    @staticmethod
    def _object(doc: object) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise ApiError("invalid_response", "expected a JSON object", 200)
        return doc


def _hex(value: bytes | str) -> str:
    """A hash or id for a path: bytes as ``0x`` hex; text as the caller gave it (the node checks it)."""
    return "0x" + bytes(value).hex() if isinstance(value, (bytes, bytearray)) else value


def _address(value: bytes | str) -> str:
    """An address for a path: bytes in EIP-55 form; text as the caller gave it (the node checks it)."""
    return to_checksum_address(bytes(value)) if isinstance(value, (bytes, bytearray)) else value


@dataclass(frozen=True, slots=True)
class VerifiedValue:
    """A state value proven under a certified head."""

    header: CertifiedHeader
    """The finalized header (height, digest, state root) the value was proven against."""
    value: bytes | None
    """The value; None when the key is absent at that head."""


@dataclass(frozen=True, slots=True)
class VerifiedAccount:
    """An account proven under a certified head."""

    header: CertifiedHeader
    """The finalized header the account was proven against."""
    balance: int
    """Balance at that head."""
    nonce: int
    """Committed nonce at that head."""


def _api_error(status: int, raw: bytes) -> ApiError:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("code"), str):
        return ApiError(doc["code"], str(doc.get("message", "")), status)
    snippet = raw[:200].decode("utf-8", "replace").strip()
    return ApiError(f"http_{status}", snippet or f"HTTP {status}", status)
