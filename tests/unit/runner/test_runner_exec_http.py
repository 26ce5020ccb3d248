"""HTTP executor against a real local aiohttp server (docs/runner-executors.md §HTTP)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cowboy_protocol.types.jobspec import Freshness, HttpJob
from cowboy_runner.executors import ExecutorError, HttpConfig, HttpExecutor
from tests.unit.runner_exec_servers import HUGE_TOTAL, HttpState, http_app, serve

pytestmark = pytest.mark.timeout(300)

LOCAL = HttpConfig(allowed_domains=("127.0.0.1",), allow_private_addresses=True, max_response_bytes=1 << 20)
NOW = 1_700_000_000.0


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, HttpState]]:
    state = HttpState()
    async with serve(http_app(state)) as base:
        yield base, state


def _executor(config: HttpConfig = LOCAL) -> HttpExecutor:
    return HttpExecutor(config, max_output_bytes=256 * 1024, clock=lambda: NOW)


async def _run(job: HttpJob, config: HttpConfig = LOCAL, deadline_s: float = 10.0) -> Any:
    return await _executor(config).execute(job, None, deadline_s=deadline_s)


async def _fails(job: HttpJob, code: str, config: HttpConfig = LOCAL, deadline_s: float = 10.0) -> ExecutorError:
    with pytest.raises(ExecutorError) as info:
        await _run(job, config, deadline_s)
    assert info.value.code == code, info.value
    return info.value


async def test_get_sends_method_headers_exactly_and_returns_raw_body(server: tuple[str, HttpState]) -> None:
    base, _ = server
    job = HttpJob(url=f"{base}/echo?q=a%20b", headers={"X-Api-Key": "k1", "Accept": "application/json"})
    result = await _run(job)
    seen = json.loads(result.output)  # no extraction: the output is the body exactly as received
    assert seen["method"] == "GET" and seen["path"] == "/echo?q=a%20b"
    assert ["X-Api-Key", "k1"] in seen["headers"] and ["Accept", "application/json"] in seen["headers"]
    assert seen["has_body"] is False
    assert result.usage_units == len(result.output)
    assert result.detail["status"] == 200


async def test_post_sends_body_bytes_exactly(server: tuple[str, HttpState]) -> None:
    base, _ = server
    body = b'{"a":1}\x00\xff'
    seen = json.loads((await _run(HttpJob(url=f"{base}/echo", method="POST", body=body,
                                          headers={"Content-Type": "application/octet-stream"}))).output)
    assert seen["method"] == "POST" and seen["body"].encode("latin-1") == body
    assert ["Content-Type", "application/octet-stream"] in seen["headers"]


async def test_extraction_returns_canonical_json(server: tuple[str, HttpState]) -> None:
    base, _ = server
    result = await _run(HttpJob(url=f"{base}/doc", extraction="$.data"))
    # sorted keys, no spaces, the array order kept
    assert result.output == b'{"a":null,"items":[{"name":"a","price":1.5},{"name":"b","price":2}],"z":true}'
    assert (await _run(HttpJob(url=f"{base}/doc", extraction="$.data.items[1].price"))).output == b"2"
    assert (await _run(HttpJob(url=f"{base}/doc", extraction="data.items.0.name"))).output == b'"a"'
    assert (await _run(HttpJob(url=f"{base}/doc", extraction="$['odd.key']"))).output == b'"dots"'


async def test_extraction_missing_path_is_bad_extraction(server: tuple[str, HttpState]) -> None:
    base, _ = server
    await _fails(HttpJob(url=f"{base}/doc", extraction="$.data.items[5]"), "bad_extraction")
    await _fails(HttpJob(url=f"{base}/echo", extraction="$.nope"), "bad_extraction")


async def test_non_2xx_is_http_status(server: tuple[str, HttpState]) -> None:
    base, _ = server
    err = await _fails(HttpJob(url=f"{base}/status/404"), "http_status")
    assert err.detail["status"] == 404
    await _fails(HttpJob(url=f"{base}/status/503"), "http_status")


async def test_huge_streamed_body_is_refused_without_reading_it_all(server: tuple[str, HttpState]) -> None:
    base, state = server
    cfg = HttpConfig(allowed_domains=("127.0.0.1",), allow_private_addresses=True, max_response_bytes=256 * 1024)
    await _fails(HttpJob(url=f"{base}/huge"), "response_too_large", cfg)
    async with asyncio.timeout(10):
        await state.huge_done.wait()  # the server notices the closed connection
    assert state.huge_sent < HUGE_TOTAL // 4


async def test_declared_content_length_over_cap_is_refused(server: tuple[str, HttpState]) -> None:
    base, _ = server
    err = await _fails(HttpJob(url=f"{base}/declared"), "response_too_large")
    assert err.detail["declared"] == 2 * 1024 * 1024


async def test_cap_applies_to_decoded_body(server: tuple[str, HttpState]) -> None:
    base, _ = server  # 4 MiB of "a" gzips to a few KiB; the cap must count what is decoded
    await _fails(HttpJob(url=f"{base}/gzip"), "response_too_large")


async def test_slow_endpoint_times_out_within_deadline(server: tuple[str, HttpState]) -> None:
    base, _ = server
    task = asyncio.ensure_future(_run(HttpJob(url=f"{base}/slow"), deadline_s=0.5))
    with pytest.raises(ExecutorError) as info:
        async with asyncio.timeout(10):  # bounded: the server would answer only after 30 s
            await task
    assert info.value.code == "timeout"


async def test_domain_not_in_allow_list_is_refused_before_connecting(server: tuple[str, HttpState]) -> None:
    base, state = server
    cfg = HttpConfig(allowed_domains=("example.com", "*.127.0.0.1"), allow_private_addresses=True)
    await _fails(HttpJob(url=f"{base}/echo"), "domain_not_allowed", cfg)
    await _fails(HttpJob(url=f"{base}/echo"), "domain_not_allowed", HttpConfig(allow_private_addresses=True))
    assert state.hits == []


async def test_wildcard_allow_list_matches_like_the_capability_filter(server: tuple[str, HttpState]) -> None:
    base, _ = server
    port = base.rsplit(":", 1)[1]
    cfg = HttpConfig(allowed_domains=("*.localhost",), allow_private_addresses=True)
    # *.suffix: a strict subdomain, not the apex (the same rule as cowboy_protocol.jobs.hosts.host_matches)
    await _fails(HttpJob(url=f"http://localhost:{port}/echo"), "domain_not_allowed", cfg)
    cfg_star = HttpConfig(allowed_domains=("*",), allow_private_addresses=True)
    assert (await _run(HttpJob(url=f"{base}/echo"), cfg_star)).detail["status"] == 200


async def test_redirect_to_host_off_the_list_is_refused(server: tuple[str, HttpState]) -> None:
    base, state = server
    port = base.rsplit(":", 1)[1]
    job = HttpJob(url=f"{base}/redirect?to=http://localhost:{port}/echo")
    await _fails(job, "domain_not_allowed")
    assert state.hits == ["/redirect"]  # the off-list target was never requested


async def test_redirect_on_the_list_is_followed(server: tuple[str, HttpState]) -> None:
    base, state = server
    result = await _run(HttpJob(url=f"{base}/redirect?to=/doc", extraction="$.data.z"))
    assert result.output == b"true" and state.hits == ["/redirect", "/doc"]
    # 302 after POST becomes GET without a body; 307 keeps method and body
    seen = json.loads((await _run(HttpJob(url=f"{base}/redirect?to=/echo", method="POST", body=b"b"))).output)
    assert seen["method"] == "GET" and seen["body"] == ""
    seen = json.loads((await _run(HttpJob(url=f"{base}/redirect307?to=/echo", method="PUT", body=b"b"))).output)
    assert seen["method"] == "PUT" and seen["body"] == "b"


async def test_redirect_loop_is_bounded(server: tuple[str, HttpState]) -> None:
    base, _ = server
    cfg = HttpConfig(allowed_domains=("127.0.0.1",), allow_private_addresses=True, max_redirects=2)
    await _fails(HttpJob(url=f"{base}/redirect?to=/redirect%3Fto%3D/redirect%253Fto%253D/doc"),
                 "too_many_redirects", cfg)


async def test_private_addresses_refused_by_default(server: tuple[str, HttpState]) -> None:
    base, state = server
    port = base.rsplit(":", 1)[1]
    cfg = HttpConfig(allowed_domains=("*",))
    await _fails(HttpJob(url=f"{base}/echo"), "address_not_allowed", cfg)  # an IP literal
    await _fails(HttpJob(url=f"http://localhost:{port}/echo"), "address_not_allowed", cfg)  # resolved by name
    assert state.hits == []


async def test_cache_control_sent_when_given(server: tuple[str, HttpState]) -> None:
    base, _ = server
    job = HttpJob(url=f"{base}/echo", freshness=Freshness(max_age_seconds=60, cache_control="no-cache"))
    seen = json.loads((await _run(job)).output)
    assert ["Cache-Control", "no-cache"] in seen["headers"]


@pytest.mark.parametrize("ts", [str(int(NOW) - 30), str(int(NOW * 1000) - 30_000), "2023-11-14T22:12:50Z"])
async def test_fresh_timestamp_accepted(server: tuple[str, HttpState], ts: str) -> None:
    base, _ = server  # 2023-11-14T22:12:50Z is NOW - 30 s
    job = HttpJob(url=f"{base}/stamp?ts={ts}", extraction="$.value",
                  freshness=Freshness(max_age_seconds=60, timestamp_field="$.meta.updated"))
    assert (await _run(job)).output == b"42"


@pytest.mark.parametrize("ts", [str(int(NOW) - 61), str(int(NOW * 1000) - 61_000), "2023-11-14T22:11:00%2B00:00"])
async def test_stale_timestamp_refused(server: tuple[str, HttpState], ts: str) -> None:
    base, _ = server
    job = HttpJob(url=f"{base}/stamp?ts={ts}", freshness=Freshness(max_age_seconds=60, timestamp_field="meta.updated"))
    await _fails(job, "stale_data")


async def test_missing_or_bad_timestamp_refused(server: tuple[str, HttpState]) -> None:
    base, _ = server
    await _fails(HttpJob(url=f"{base}/stamp?ts=1", freshness=Freshness(max_age_seconds=60, timestamp_field="$.x")),
                 "bad_timestamp")
    await _fails(HttpJob(url=f"{base}/stamp?ts=yesterday",
                         freshness=Freshness(max_age_seconds=60, timestamp_field="$.meta.updated")), "bad_timestamp")


async def test_age_header_checked_without_timestamp_field(server: tuple[str, HttpState]) -> None:
    base, _ = server
    assert (await _run(HttpJob(url=f"{base}/aged?age=10", freshness=Freshness(max_age_seconds=60)))).output
    await _fails(HttpJob(url=f"{base}/aged?age=61", freshness=Freshness(max_age_seconds=60)), "stale_data")


async def test_output_over_result_cap_refused(server: tuple[str, HttpState]) -> None:
    base, _ = server
    ex = HttpExecutor(LOCAL, max_output_bytes=16)
    with pytest.raises(ExecutorError) as info:
        await ex.execute(HttpJob(url=f"{base}/doc"), None, deadline_s=10)
    assert info.value.code == "output_too_large"
