"""Candidate filter chain (CIP-11 §7.1 floor, §9.1 chain; DESIGN.md §4): each filter excludes exactly its runner."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.filters import (
    FILTER_NAMES,
    SelectionRequest,
    eligible,
    eligible_with_report,
    filter_report,
)
from cowboy_protocol.jobs.hosts import host_matches
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_HTTP, JOB_KIND_LLM, Health
from tests.unit.execution.jobs.test_selection_support import HEIGHT, REP_50, hashed_runners, runner

CFG = RunnerConfig()
TIMEOUT = 100


def req(**kw: object) -> SelectionRequest:
    base: dict[str, object] = dict(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                                   max_price=1_000, required_runner_pool=None, excluded=frozenset())
    base.update(kw)
    return SelectionRequest(**base)  # type: ignore[arg-type]


def run(runners: list, request: SelectionRequest, height: int = HEIGHT) -> list[bytes]:  # type: ignore[type-arg]
    return [r.address for r in eligible(runners, request, height=height, heartbeat_timeout_blocks=TIMEOUT, cfg=CFG)]


def only_excluded(bad: object, request: SelectionRequest, filter_name: str, height: int = HEIGHT,
                  **good_kw: object) -> None:
    """Three good runners and ``bad``: exactly ``bad`` is excluded, counted against ``filter_name``."""
    good = [runner(1, 0, **good_kw), runner(2, 1, **good_kw), runner(4, 3, **good_kw)]  # type: ignore[arg-type]
    everyone = [*good, bad]
    assert run(everyone, request, height) == [g.address for g in good]  # type: ignore[misc]
    report = filter_report(everyone, request, height=height, heartbeat_timeout_blocks=TIMEOUT, cfg=CFG)
    assert report == {n: (1 if n == filter_name else 0) for n in FILTER_NAMES}


def test_filter_names_follow_the_cip11_chain_order() -> None:
    assert FILTER_NAMES == ("floor", "reputation", "capability", "tee", "price", "concurrency", "pool", "excluded")


@pytest.mark.parametrize("health", [Health.UNHEALTHY, Health.PAUSED, Health.DEREGISTERED])
def test_floor_excludes_a_runner_that_is_not_healthy(health: Health) -> None:
    only_excluded(runner(3, 2, health=health), req(), "floor")


def test_floor_excludes_a_heartbeat_older_than_the_timeout_and_keeps_one_exactly_at_it() -> None:
    only_excluded(runner(3, 2, last_heartbeat=HEIGHT - TIMEOUT - 1), req(), "floor")
    assert addr_in(runner(3, 2, last_heartbeat=HEIGHT - TIMEOUT), req())


def test_floor_heartbeat_age_saturates_for_a_heartbeat_above_the_height() -> None:
    # height − last_heartbeat saturates at 0: a heartbeat recorded above the read height is fresh, not huge
    assert addr_in(runner(3, 2, last_heartbeat=HEIGHT + 5), req())
    assert addr_in(runner(3, 2, last_heartbeat=50), req(), height=10)


def addr_in(r: object, request: SelectionRequest, height: int = HEIGHT) -> bool:
    return run([r], request, height) == [r.address]  # type: ignore[attr-defined]


def test_reputation_filter_requires_at_least_the_minimum() -> None:
    only_excluded(runner(3, 2, rep=REP_50 - 1), req(), "reputation")
    assert addr_in(runner(3, 2, rep=REP_50), req())


def test_capability_filter_requires_the_job_kind() -> None:
    only_excluded(runner(3, 2, kinds=(JOB_KIND_HTTP,)), req(job_kind=JOB_KIND_LLM), "capability")


def test_capability_filter_matches_the_http_host_against_the_domain_patterns() -> None:
    http = req(job_kind=JOB_KIND_HTTP, http_host="api.example.com")
    only_excluded(runner(3, 2, domains=("other.org",)), http, "capability")
    assert addr_in(runner(3, 2, domains=("api.example.com",)), http)
    assert addr_in(runner(3, 2, domains=("*.example.com",)), http)
    assert addr_in(runner(3, 2, domains=("*",)), http)
    # the host constraint only applies to HTTP jobs
    assert addr_in(runner(3, 2, domains=("other.org",)), req(job_kind=JOB_KIND_LLM, http_host="api.example.com"))


@pytest.mark.parametrize(("host", "patterns", "expected"), [
    ("example.com", ["example.com"], True),
    ("EXAMPLE.com.", ["example.COM"], True),
    ("a.example.com", ["*.example.com"], True),
    ("a.b.example.com", ["*.example.com"], True),
    ("example.com", ["*.example.com"], False),      # the apex is not a subdomain
    ("badexample.com", ["*.example.com"], False),   # suffix match is on a label boundary
    ("example.com.evil.org", ["example.com"], False),
    ("anything.net", ["*"], True),
    ("x.org", [], False),
])
def test_http_domain_patterns(host: str, patterns: list[str], expected: bool) -> None:
    assert host_matches(host, patterns) is expected


def test_tee_filter_requires_some_tee_when_tee_is_required() -> None:
    only_excluded(runner(3, 2, tee=()), req(tee_required=True), "tee", tee=("sev-snp",))


def test_tee_filter_requires_the_named_tee_type() -> None:
    good = [runner(1, 0, tee=("sgx",)), runner(2, 1, tee=("sgx", "tdx")), runner(4, 3, tee=("sgx",))]
    bad = runner(3, 2, tee=("tdx",))
    request = req(required_tee_type="sgx")
    assert run([*good, bad], request) == [g.address for g in good]
    assert filter_report([*good, bad], request, height=HEIGHT, heartbeat_timeout_blocks=TIMEOUT, cfg=CFG)["tee"] == 1


def test_price_filter_compares_base_price_with_max_price() -> None:
    only_excluded(runner(3, 2, base_price=1_001), req(max_price=1_000), "price")
    assert addr_in(runner(3, 2, base_price=1_000), req(max_price=1_000))


def test_price_filter_excludes_a_runner_without_a_rate_for_the_kind() -> None:
    r = runner(3, 2)
    r_no_rate = type(r)(**{**{f: getattr(r, f) for f in r.__slots__}, "rate_card": type(r.rate_card)(())})
    only_excluded(r_no_rate, req(), "price")


def test_concurrency_filter_requires_a_free_slot() -> None:
    only_excluded(runner(3, 2, max_jobs=2, active=2), req(), "concurrency")
    assert addr_in(runner(3, 2, max_jobs=2, active=1), req())


def test_pool_filter_requires_the_pool_entitlement() -> None:
    good = [runner(1, 0, pools=(b"gold",)), runner(2, 1, pools=(b"a", b"gold")), runner(4, 3, pools=(b"gold",))]
    bad = runner(3, 2, pools=(b"silver",))
    request = req(required_runner_pool=b"gold")
    assert run([*good, bad], request) == [g.address for g in good]
    assert filter_report([*good, bad], request, height=HEIGHT, heartbeat_timeout_blocks=TIMEOUT,
                         cfg=CFG)["pool"] == 1
    assert addr_in(bad, req(required_runner_pool=None))


def test_excluded_filter_drops_runners_that_timed_out_on_the_job() -> None:
    bad = runner(3, 2)
    only_excluded(bad, req(excluded=frozenset({bad.address})), "excluded")


def test_a_runner_is_counted_against_its_first_failing_filter_only() -> None:
    bad = runner(3, 2, health=Health.PAUSED, rep=0, active=9, max_jobs=1)
    out, report = eligible_with_report([bad], req(), height=HEIGHT, heartbeat_timeout_blocks=TIMEOUT, cfg=CFG)
    assert out == [] and report["floor"] == 1 and sum(report.values()) == 1


def test_output_is_ordered_by_address_not_by_input_or_registry_index() -> None:
    rs = [runner(9, 0), runner(2, 1), runner(5, 2), runner(1, 3)]
    assert [r.address[0] for r in eligible(rs, req(), height=HEIGHT, heartbeat_timeout_blocks=TIMEOUT,
                                           cfg=CFG)] == [1, 2, 5, 9]


def test_duplicate_addresses_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        run([runner(1, 0), runner(1, 1)], req())


@settings(max_examples=200, deadline=None)
@given(st.permutations(list(range(12))))
def test_filter_output_does_not_depend_on_input_order(perm: list[int]) -> None:
    base = hashed_runners(12)
    base[3] = runner(base[3].address, 3, health=Health.UNHEALTHY)
    shuffled = [base[i] for i in perm]
    assert run(shuffled, req()) == run(base, req())
