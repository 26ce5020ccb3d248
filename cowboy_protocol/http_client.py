"""A small synchronous HTTP client for the node API (used by the CLI client commands).

Built on :mod:`urllib.request`; connects directly (environment proxies are
ignored: the node API is normally on localhost or a private network).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

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

    def get_json(self, path: str) -> Any:
        """``GET path`` and decode the JSON body; raises ApiError or NodeUnreachable."""
        return self._request("GET", path)

    def post_json(self, path: str, doc: Any) -> Any:
        """``POST path`` with a JSON body and decode the JSON answer; raises ApiError or NodeUnreachable."""
        return self._request("POST", path, json.dumps(doc).encode(), "application/json")

    def post_tx(self, tx_bytes: bytes) -> dict[str, Any]:
        """``POST /submit`` with raw ``tx_bytes``; returns ``{"tx_hash", "status"}``."""
        out = self._request("POST", "/submit", bytes(tx_bytes), "application/octet-stream")
        if not isinstance(out, dict):
            raise ApiError("invalid_response", "submit response is not a JSON object", 200)
        return out


    # -- verified reads (cowboy_protocol/verified_reads.py; the node is not trusted) --------------------------
    def verified_state(self, key: bytes, group_key: bytes) -> VerifiedValue:
        """``GET /state/proof?key=`` checked against ``group_key``: the raw state ``key``'s value at a certified
        head. Raises a :class:`~cowboy_protocol.verified_reads.VerificationError` (or ApiError/NodeUnreachable)."""
        doc = self._object(self.get_json("/state/proof?key=0x" + bytes(key).hex()))
        header, value = verify_read(doc, group_key, key=bytes(key))
        if doc.get("root") != "0x" + header.state_root.hex():
            raise ValueMismatch("the answer's root is not the certified header's state root")
        return VerifiedValue(header, value)

    def verified_account(self, address: bytes, group_key: bytes) -> VerifiedAccount:
        """``GET /account/{address}?proof=true`` checked against ``group_key``; the answer's balance and nonce must
        be the proven ones (``next_pending_nonce`` is the node's mempool view: not provable, not returned)."""
        doc = self._object(self.get_json(f"/account/0x{bytes(address).hex()}?proof=true"))
        header, raw = verify_read(doc, group_key, key=ACCOUNT_PREFIX + bytes(address))
        balance, nonce = decode_account(raw)
        if doc.get("balance") != str(balance) or doc.get("nonce") != nonce:
            raise ValueMismatch("the answer's balance or nonce is not the proven account")
        return VerifiedAccount(header, balance, nonce)

    def verified_actor_state(self, actor: bytes, key: bytes, group_key: bytes) -> VerifiedValue:
        """``GET /actor/{actor}/state?key=…&proof=true`` checked against ``group_key``: the entry's proven value
        (None: unset), which the answer's ``value`` must be."""
        doc = self._object(self.get_json(f"/actor/0x{bytes(actor).hex()}/state?key=0x{bytes(key).hex()}&proof=true"))
        header, value = verify_read(doc, group_key, key=actor_state_key(actor, key))
        if doc.get("value") != (None if value is None else "0x" + value.hex()):
            raise ValueMismatch("the answer's value is not the proven one")
        return VerifiedValue(header, value)

    @staticmethod
    def _object(doc: Any) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise ApiError("invalid_response", "expected a JSON object", 200)
        return doc


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
