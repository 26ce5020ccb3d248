"""A small synchronous HTTP client for the node API (used by the CLI client commands).

Built on :mod:`urllib.request`; connects directly (environment proxies are
ignored: the node API is normally on localhost or a private network).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

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


def _api_error(status: int, raw: bytes) -> ApiError:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("code"), str):
        return ApiError(doc["code"], str(doc.get("message", "")), status)
    snippet = raw[:200].decode("utf-8", "replace").strip()
    return ApiError(f"http_{status}", snippet or f"HTTP {status}", status)
