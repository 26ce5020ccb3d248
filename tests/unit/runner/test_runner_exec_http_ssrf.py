"""HTTP executor SSRF rules (issue 21 item 6): translated IPv6 forms judged by the IPv4 address they carry,
credentials dropped on cross-origin redirects, the operator's method allow-list."""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.abc import ResolveResult

from cowboy_protocol.types.jobspec import HttpJob
from cowboy_runner.executors import ExecutorError, HttpConfig, HttpExecutor
from cowboy_runner.executors.addresses import embedded_ipv4, is_global_address
from cowboy_runner.executors.http import BlockedAddressError, PublicOnlyResolver
from tests.unit.runner_exec_servers import HttpState, http_app, serve

pytestmark = pytest.mark.timeout(300)


def _teredo(server: str, client: str) -> str:
    """A Teredo address (RFC 4380 §4): 2001:0000:<server>:<flags>:<port ^ 0xffff>:<client ^ 0xffffffff>."""
    s, c = int(ipaddress.IPv4Address(server)), int(ipaddress.IPv4Address(client))
    value = (0x2001_0000 << 96) | (s << 64) | (0x8000 << 48) | ((0x1234 ^ 0xFFFF) << 32) | (c ^ 0xFFFF_FFFF)
    return str(ipaddress.IPv6Address(value))


# Each translated form of the metadata address 169.254.169.254 and of loopback; all hand-built from the RFCs.
BLOCKED = [
    "64:ff9b::a9fe:a9fe",            # NAT64 well-known prefix (RFC 6052) → 169.254.169.254
    "64:ff9b::7f00:1",               # NAT64 → 127.0.0.1
    "64:ff9b::a00:1",                # NAT64 → 10.0.0.1
    "64:ff9b:1::a9fe:a9fe",          # NAT64 local-use prefix (RFC 8215): target unknowable
    "2002:a9fe:a9fe::1",             # 6to4 (RFC 3056) → 169.254.169.254
    "2002:7f00:1::",                 # 6to4 → 127.0.0.1
    "::ffff:169.254.169.254",        # IPv4-mapped
    "::ffff:127.0.0.1",
    "::a9fe:a9fe",                   # IPv4-compatible (deprecated) → 169.254.169.254
    _teredo("8.8.8.8", "169.254.169.254"),   # Teredo, client side private
    _teredo("10.0.0.1", "8.8.8.8"),          # Teredo, server side private
    "169.254.169.254", "127.0.0.1", "10.1.2.3", "100.64.0.1", "::1", "fe80::1", "fc00::1", "224.0.0.1", "ff02::1",
    "not-an-address",
]
ALLOWED = [
    "64:ff9b::808:808",              # NAT64 → 8.8.8.8
    "2002:808:808::1",               # 6to4 → 8.8.8.8
    "::ffff:8.8.8.8",
    _teredo("8.8.4.4", "1.1.1.1"),
    "8.8.8.8", "2606:4700:4700::1111",
]


@pytest.mark.parametrize("text", BLOCKED)
def test_translated_and_private_addresses_are_not_global(text: str) -> None:
    assert not is_global_address(text)


@pytest.mark.parametrize("text", ALLOWED)
def test_translated_forms_of_public_ipv4_are_global(text: str) -> None:
    assert is_global_address(text)


def test_embedded_ipv4_extracts_each_form() -> None:
    v6 = ipaddress.IPv6Address
    meta = ipaddress.IPv4Address("169.254.169.254")
    assert embedded_ipv4(v6("64:ff9b::a9fe:a9fe")) == (meta,)
    assert embedded_ipv4(v6("2002:a9fe:a9fe::1")) == (meta,)
    assert embedded_ipv4(v6("::ffff:169.254.169.254")) == (meta,)
    assert embedded_ipv4(v6(_teredo("8.8.8.8", "169.254.169.254"))) == (ipaddress.IPv4Address("8.8.8.8"), meta)
    assert embedded_ipv4(v6("64:ff9b:1::1")) == ()
    assert embedded_ipv4(v6("2606:4700::1")) is None
    assert embedded_ipv4(v6("::1")) is None


@pytest.mark.parametrize("host", ["[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::1]", "[::ffff:a9fe:a9fe]"])
async def test_ip_literal_translated_metadata_address_refused_before_connecting(host: str) -> None:
    executor = HttpExecutor(HttpConfig(allowed_domains=("*",)), max_output_bytes=1024)
    with pytest.raises(ExecutorError) as info:
        await executor.execute(HttpJob(url=f"http://{host}/latest/meta-data/"), None, deadline_s=5.0)
    assert info.value.code == "address_not_allowed"


class _FakeResolver:
    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[ResolveResult]:
        return [ResolveResult(hostname=host, host=h, port=port, family=socket.AF_INET6, proto=0, flags=0)
                for h in self.hosts]

    async def close(self) -> None:
        pass


async def test_name_resolving_to_nat64_or_6to4_metadata_is_blocked() -> None:
    resolver = PublicOnlyResolver()
    resolver._inner = _FakeResolver(["64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1"])  # type: ignore[assignment]
    with pytest.raises(BlockedAddressError):
        await resolver.resolve("evil.example", 80)
    resolver._inner = _FakeResolver(["64:ff9b::a9fe:a9fe", "64:ff9b::808:808"])  # type: ignore[assignment]
    kept = await resolver.resolve("mixed.example", 80)
    assert [r["host"] for r in kept] == ["64:ff9b::808:808"]


# -- credentials on redirects ---------------------------------------------------------------------------------
@pytest.fixture
async def server() -> AsyncIterator[tuple[str, HttpState]]:
    state = HttpState()
    async with serve(http_app(state)) as base:
        yield base, state


LOCAL = HttpConfig(allowed_domains=("127.0.0.1", "localhost"), allow_private_addresses=True)
SECRET_HEADERS = (("Authorization", "Bearer job-secret"), ("Cookie", "session=s1"), ("X-Api-Key", "k1"),
                  ("X-Trace", "keep-me"))


def _seen_headers(output: bytes) -> dict[str, str]:
    return {k.lower(): v for k, v in json.loads(output)["headers"]}


async def test_cross_origin_redirect_drops_credential_headers(server: tuple[str, HttpState]) -> None:
    base, state = server
    port = base.rsplit(":", 1)[1]
    job = HttpJob(url=f"{base}/redirect?to=http://localhost:{port}/echo", headers=SECRET_HEADERS)
    result = await HttpExecutor(LOCAL, max_output_bytes=1 << 20).execute(job, None, deadline_s=10.0)
    seen = _seen_headers(result.output)
    assert state.hits == ["/redirect", "/echo"]
    assert "authorization" not in seen and "cookie" not in seen and "x-api-key" not in seen
    assert seen["x-trace"] == "keep-me"


async def test_credentials_stay_dropped_when_a_redirect_comes_back(server: tuple[str, HttpState]) -> None:
    base, state = server
    port = base.rsplit(":", 1)[1]
    back = f"http://localhost:{port}/redirect%3Fto%3D{base}/echo"
    job = HttpJob(url=f"{base}/redirect?to={back}", headers=SECRET_HEADERS)
    result = await HttpExecutor(LOCAL, max_output_bytes=1 << 20).execute(job, None, deadline_s=10.0)
    assert state.hits == ["/redirect", "/redirect", "/echo"]  # 127.0.0.1 → localhost → 127.0.0.1
    assert "authorization" not in _seen_headers(result.output)


async def test_same_origin_redirect_keeps_credential_headers(server: tuple[str, HttpState]) -> None:
    base, _ = server
    job = HttpJob(url=f"{base}/redirect?to=/echo", headers=SECRET_HEADERS)
    result = await HttpExecutor(LOCAL, max_output_bytes=1 << 20).execute(job, None, deadline_s=10.0)
    seen = _seen_headers(result.output)
    assert seen["authorization"] == "Bearer job-secret" and seen["cookie"] == "session=s1"


async def test_port_change_is_another_origin(server: tuple[str, HttpState]) -> None:
    base, _ = server
    async with serve(http_app(HttpState())) as other:
        job = HttpJob(url=f"{base}/redirect?to={other}/echo", headers=SECRET_HEADERS)
        result = await HttpExecutor(LOCAL, max_output_bytes=1 << 20).execute(job, None, deadline_s=10.0)
    assert "authorization" not in _seen_headers(result.output)


# -- method allow-list ------------------------------------------------------------------------------------------
async def test_method_outside_allow_list_refused_before_connecting(server: tuple[str, HttpState]) -> None:
    base, state = server
    cfg = HttpConfig(allowed_domains=("127.0.0.1",), allow_private_addresses=True, allowed_methods=("GET", "HEAD"))
    executor = HttpExecutor(cfg, max_output_bytes=1 << 20)
    with pytest.raises(ExecutorError) as info:
        await executor.execute(HttpJob(url=f"{base}/echo", method="DELETE"), None, deadline_s=5.0)
    assert info.value.code == "method_not_allowed" and state.hits == []
    assert (await executor.execute(HttpJob(url=f"{base}/echo"), None, deadline_s=5.0)).detail["status"] == 200


async def test_method_a_redirect_switches_to_must_be_allowed(server: tuple[str, HttpState]) -> None:
    base, state = server
    cfg = HttpConfig(allowed_domains=("127.0.0.1",), allow_private_addresses=True, allowed_methods=("POST",))
    with pytest.raises(ExecutorError) as info:  # 302 after POST continues as GET
        await HttpExecutor(cfg, max_output_bytes=1 << 20).execute(
            HttpJob(url=f"{base}/redirect?to=/echo", method="POST", body=b"x"), None, deadline_s=5.0)
    assert info.value.code == "method_not_allowed" and state.hits == ["/redirect"]


def test_allowed_methods_must_be_job_spec_methods() -> None:
    with pytest.raises(ValueError, match="allowed_methods"):
        HttpConfig(allowed_methods=("GET", "TRACE"))
    assert HttpConfig(allowed_methods=("get",)).allowed_methods == ("GET",)
