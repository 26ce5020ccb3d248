"""JSON form of runner capabilities and rate cards (docs/runners.md §4; ``cowboy_protocol/types/runner_json.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.runner import JOB_KINDS, Capabilities, Health, Rate, RateCard, RunnerRecord
from cowboy_protocol.types.runner_json import (
    capabilities_to_json,
    rate_card_to_json,
    record_to_json,
    runner_file_from_json,
)
from cowboy_protocol.types.validation_errors import ValidationError

EXAMPLE = Path(__file__).resolve().parents[3] / "configs" / "examples" / "runner-capabilities.json"
BRIEF_DOC: dict[str, Any] = {
    "job_types": ["http"], "regions": ["eu-west"], "http_domains": ["example.com", "*.example.org"],
    "max_concurrent_jobs": 4, "tee_types": [], "pools": [],
    "rate_card": {"http": {"base_price": "1000", "price_per_unit": "0"}}}


def _err(doc: object, *, require_rate_card: bool = True) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        runner_file_from_json(doc, require_rate_card=require_rate_card)
    assert info.value.code == "invalid_capabilities"
    return info.value


def test_documented_capabilities_file_parses_to_the_canonical_record_fields() -> None:
    caps, card = runner_file_from_json(BRIEF_DOC, require_rate_card=True)
    assert caps == Capabilities(job_kinds=(0x01,), regions=("eu-west",), http_domains=("*.example.org", "example.com"),
                                max_concurrent_jobs=4, tee_types=(), pools=())
    assert card == RateCard(((0x01, Rate(base_price=1000, price_per_unit=0)),))


def test_example_capabilities_file_serves_http_for_example_com() -> None:
    caps, card = runner_file_from_json(json.loads(EXAMPLE.read_text()), require_rate_card=True)
    assert 0x01 in caps.job_kinds and "example.com" in caps.http_domains
    assert card is not None and card.rate_for(0x01) is not None


def test_lists_are_sorted_and_deduplicated_and_domains_lower_cased() -> None:
    doc = dict(BRIEF_DOC, job_types=["http", "llm", "http"], regions=["us", "eu", "us"],
               http_domains=["B.example.com", "a.example.com", "b.example.com"], pools=["0x02", "0x01", "0x02"])
    caps, _ = runner_file_from_json(doc, require_rate_card=True)
    assert caps.job_kinds == (0x00, 0x01)
    assert caps.regions == ("eu", "us")
    assert caps.http_domains == ("a.example.com", "b.example.com")
    assert caps.pools == (b"\x01", b"\x02")
    # The normalised value is the canonical one: it survives the strict CBOR decoder.
    assert Capabilities.from_cbor(caps.to_cbor()) == caps


def test_unknown_top_level_key_is_an_error_naming_the_key() -> None:
    e = _err(dict(BRIEF_DOC, gpu=True))
    assert "gpu" in e.message and e.field == "gpu"


def test_unknown_rate_card_entry_key_is_an_error_naming_the_key_path() -> None:
    e = _err(dict(BRIEF_DOC, rate_card={"http": {"base_price": "1", "price_per_unit": "0", "tip": "1"}}))
    assert "rate_card.http.tip" in e.message


@pytest.mark.parametrize("doc,where", [
    (dict(BRIEF_DOC, job_types=["ftp"]), "job_types[0]"),
    (dict(BRIEF_DOC, job_types=[]), "job_types"),
    ({k: v for k, v in BRIEF_DOC.items() if k != "job_types"}, "job_types"),
    ({k: v for k, v in BRIEF_DOC.items() if k != "max_concurrent_jobs"}, "max_concurrent_jobs"),
    (dict(BRIEF_DOC, max_concurrent_jobs=0), "max_concurrent_jobs"),
    (dict(BRIEF_DOC, max_concurrent_jobs=True), "max_concurrent_jobs"),
    (dict(BRIEF_DOC, regions="eu"), "regions"),
    (dict(BRIEF_DOC, regions=[""]), "regions[0]"),
    (dict(BRIEF_DOC, http_domains=["exa mple.com"]), "http_domains[0]"),
    (dict(BRIEF_DOC, http_domains=["a.*.com"]), "http_domains[0]"),
    (dict(BRIEF_DOC, pools=["01"]), "pools[0]"),
    (dict(BRIEF_DOC, pools=["0x" + "00" * 33]), "pools[0]"),
    (dict(BRIEF_DOC, rate_card={"http": {"base_price": "-1", "price_per_unit": "0"}}), "rate_card.http.base_price"),
    (dict(BRIEF_DOC, rate_card={"http": {"base_price": 1.5, "price_per_unit": "0"}}), "rate_card.http.base_price"),
    (dict(BRIEF_DOC, rate_card={"http": {"base_price": str(2**128), "price_per_unit": "0"}}),
     "rate_card.http.base_price"),
    (dict(BRIEF_DOC, rate_card={"http": {"base_price": "1"}}), "rate_card.http.price_per_unit"),
    (dict(BRIEF_DOC, rate_card={"llm": {"base_price": "1", "price_per_unit": "0"}}), "rate_card.llm"),
    (dict(BRIEF_DOC, rate_card={"ftp": {"base_price": "1", "price_per_unit": "0"}}), "rate_card.ftp"),
    ({k: v for k, v in BRIEF_DOC.items() if k != "rate_card"}, "rate_card"),
    ([], ""),
])
def test_bad_capabilities_files_are_rejected_naming_the_field(doc: object, where: str) -> None:
    e = _err(doc)
    assert e.field == where, e.message


def test_rate_card_is_optional_for_an_update() -> None:
    doc = {k: v for k, v in BRIEF_DOC.items() if k != "rate_card"}
    caps, card = runner_file_from_json(doc, require_rate_card=False)
    assert card is None and caps.job_kinds == (0x01,)


def test_amounts_accept_decimal_strings_and_integers() -> None:
    doc = dict(BRIEF_DOC, rate_card={"http": {"base_price": 10**30, "price_per_unit": "7"}})
    _, card = runner_file_from_json(doc, require_rate_card=True)
    assert card == RateCard(((1, Rate(10**30, 7)),))


def test_json_views_round_trip_through_the_parser() -> None:
    caps, card = runner_file_from_json(BRIEF_DOC, require_rate_card=True)
    assert card is not None
    doc = {**capabilities_to_json(caps), "rate_card": rate_card_to_json(card)}
    assert runner_file_from_json(doc, require_rate_card=True) == (caps, card)


def test_record_json_view() -> None:
    caps, card = runner_file_from_json(BRIEF_DOC, require_rate_card=True)
    assert card is not None
    rec = RunnerRecord(address=bytes.fromhex("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"), index=3, stake=10**20,
                       capabilities=caps, rate_card=card, health=Health.UNHEALTHY, registered_at=1, last_heartbeat=2,
                       reputation_x1e9=5, active_jobs=0, unbonding_until=0)
    out = record_to_json(rec)
    assert out["address"] == "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55 test vector
    assert (out["index"], out["stake"], out["health"]) == (3, "100000000000000000000", "unhealthy")
    assert out["rate_card"] == {"http": {"base_price": "1000", "price_per_unit": "0"}}


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(regions=st.lists(_NAME, max_size=8), domains=st.lists(_NAME.map(lambda s: "h" + s + "0.example"), max_size=8),
       kinds=st.lists(st.sampled_from(sorted(JOB_KINDS)), min_size=1, max_size=6), data=st.data())
def test_file_order_and_duplicates_do_not_change_the_canonical_bytes(regions: list[str], domains: list[str],
                                                                     kinds: list[str], data: st.DataObject) -> None:
    doc = {"job_types": kinds, "regions": regions, "http_domains": domains, "max_concurrent_jobs": 1}
    shuffled = {"job_types": data.draw(st.permutations(kinds + kinds[:1])),
                "regions": data.draw(st.permutations(regions + regions[:2])),
                "http_domains": data.draw(st.permutations([d.upper() for d in domains])),
                "max_concurrent_jobs": 1}
    a, _ = runner_file_from_json(doc, require_rate_card=False)
    b, _ = runner_file_from_json(shuffled, require_rate_card=False)
    assert encode(a.to_cbor()) == encode(b.to_cbor())
    assert Capabilities.from_cbor(decode(encode(a.to_cbor()))) == a  # canonical: the strict decoder accepts it
