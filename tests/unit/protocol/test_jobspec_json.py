"""JSON form of job requests (``tx submit-job --spec``) and the RPC view of stored specs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from cowboy_protocol.types.jobspec import (
    CallbackInfo,
    HttpJob,
    JobRequest,
    McpJob,
    ResourceBounds,
    job_spec_hash,
    validate_request,
)
from cowboy_protocol.types.jobspec_checks import NumericToleranceCheck, VerificationConfig, VerificationMode
from cowboy_protocol.types.jobspec_json import job_request_to_json, job_spec_to_json, parse_job_request_json
from cowboy_protocol.types.validation_errors import ValidationError
from tests.unit.protocol.test_jobspec import requests

EXAMPLE = Path(__file__).resolve().parents[3] / "configs" / "examples" / "job-http.json"
MINIMAL: dict[str, Any] = {"job_type": {"kind": "http", "url": "https://example.com/x"}, "max_price": 5}


def _error(doc: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        parse_job_request_json(doc)
    assert info.value.code == "invalid_job_spec"
    return info.value


def test_example_http_job_file_parses_and_validates() -> None:
    req = parse_job_request_json(json.loads(EXAMPLE.read_text()))
    validate_request(req)
    assert req.job_type == HttpJob(url="https://example.com/data.json", method="GET",
                                   headers=(("Accept", "application/json"),))
    assert req.verification == VerificationConfig(mode=VerificationMode.NONE, runners=1, threshold=1)
    assert (req.max_price, req.tip, req.timeout_blocks) == (1_000_000, 0, 100)
    assert req.callback == CallbackInfo.NONE


def test_omitted_fields_take_the_documented_defaults() -> None:
    req = parse_job_request_json(MINIMAL)
    assert req == JobRequest(job_type=HttpJob(url="https://example.com/x"), bounds=ResourceBounds(),
                             verification=VerificationConfig(), max_price=5, tip=0, timeout_blocks=100,
                             callback=CallbackInfo.NONE, required_runner_pool=None, attachments=None)
    assert ResourceBounds() == ResourceBounds(max_input_tokens=8192, max_output_tokens=1024, max_wall_time_seconds=60,
                                              max_memory_mb=512, max_retries=3)
    majority = parse_job_request_json({**MINIMAL, "verification": {"mode": "majority_vote", "runners": 4}})
    assert majority.verification.threshold == 3  # runners // 2 + 1


def test_to_json_fills_every_field_and_parses_back() -> None:
    doc = job_request_to_json(parse_job_request_json(MINIMAL))
    assert doc == {
        "job_type": {"kind": "http", "url": "https://example.com/x", "method": "GET", "headers": {}, "body": None,
                     "extraction": None, "freshness": None},
        "bounds": {"max_input_tokens": 8192, "max_output_tokens": 1024, "max_wall_time_seconds": 60,
                   "max_memory_mb": 512, "max_retries": 3},
        "verification": {"mode": "none", "runners": 1, "threshold": 1, "checks": [], "tee_required": False,
                         "dispute_window_blocks": 0, "required_tee_type": None},
        "max_price": "5", "tip": "0", "timeout_blocks": 100, "callback": None, "required_runner_pool": None,
        "attachments": None,
    }
    assert job_request_to_json(parse_job_request_json(doc)) == doc


@settings(max_examples=200, deadline=None)
@given(requests)
def test_json_round_trip(req: JobRequest) -> None:
    doc = job_request_to_json(req)
    assert parse_job_request_json(json.loads(json.dumps(doc))) == req


def test_spec_view_adds_id_submitter_height_and_hash() -> None:
    req = parse_job_request_json(MINIMAL)
    submitter = bytes.fromhex("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")
    spec = req.to_spec(b"\x11" * 32, submitter, 42)
    view = job_spec_to_json(spec)
    assert view["job_id"] == "0x" + "11" * 32
    assert view["submitter"] == "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55 test vector
    assert view["submitted_at"] == 42
    assert view["job_spec_hash"] == "0x" + job_spec_hash(spec).hex()
    assert {k: v for k, v in view.items() if k not in ("job_id", "submitter", "submitted_at", "job_spec_hash")} \
        == job_request_to_json(req)


def test_callback_and_byte_fields_use_hex_and_addresses() -> None:
    doc = {**MINIMAL, "callback": {"actor": "0x" + "66" * 20, "handler": "on_result", "payload": "0x0001"},
           "required_runner_pool": "0xab"}
    req = parse_job_request_json(doc)
    assert req.callback == CallbackInfo(actor=b"\x66" * 20, handler="on_result", payload=b"\x00\x01")
    assert req.required_runner_pool == b"\xab"
    out = job_request_to_json(req)
    assert out["callback"] == {"actor": "0x" + "66" * 20, "handler": "on_result", "payload": "0x0001",
                               "correlation_id": "", "context": "0x"}


def test_float_fields_accept_integers_and_encode_as_float64() -> None:
    doc = {**MINIMAL, "verification": {"mode": "structured_match", "runners": 3,
                                       "checks": [{"kind": "numeric_tolerance", "field": "p", "tolerance": 1}]}}
    check = parse_job_request_json(doc).verification.checks[0]
    assert check == NumericToleranceCheck(field="p", tolerance=1.0)
    assert isinstance(check, NumericToleranceCheck)
    assert type(check.tolerance) is float


def test_mcp_arguments_convert_json_numbers_canonically() -> None:
    doc = {"job_type": {"kind": "mcp", "server": "s", "tool_name": "t",
                        "arguments": {"a": 2.0, "b": 1.5, "c": 2**64, "d": -(2**64), "e": [1e300]}},
           "max_price": 1}
    job = parse_job_request_json(doc).job_type
    assert isinstance(job, McpJob)
    assert job.arguments == {"a": 2, "b": 1.5, "c": float(2**64), "d": -(2**64), "e": [1e300]}
    assert isinstance(job.arguments, dict)
    assert type(job.arguments["a"]) is int
    assert type(job.arguments["c"]) is float  # integral but outside the integer range: float64


@pytest.mark.parametrize(("doc", "path"), [
    ({**MINIMAL, "extra": 1}, "extra"),
    ({**MINIMAL, "job_type": {**MINIMAL["job_type"], "foo": 1}}, "job_type.foo"),
    ({**MINIMAL, "bounds": {"max_retries": 1, "bogus": 2}}, "bounds.bogus"),
    ({**MINIMAL, "verification": {"mode": "structured_match", "runners": 3,
                                  "checks": [{"kind": "majority_vote", "field": "a", "x": 1}]}},
     "verification.checks[0].x"),
    ({**MINIMAL, "job_type": {**MINIMAL["job_type"], "freshness": {"max_age_seconds": 1, "y": 2}}},
     "job_type.freshness.y"),
    ({**MINIMAL, "callback": {"actor": "0x" + "66" * 20, "handler": "h", "z": 1}}, "callback.z"),
])
def test_unknown_keys_are_errors_naming_the_path(doc: dict[str, Any], path: str) -> None:
    assert _error(doc).message.startswith(f"{path}: unknown key")


@pytest.mark.parametrize(("change", "path"), [
    ({"max_price": "01"}, "max_price"),
    ({"max_price": "-1"}, "max_price"),
    ({"max_price": 2**64}, "max_price"),
    ({"max_price": True}, "max_price"),
    ({"timeout_blocks": 1.5}, "timeout_blocks"),
    ({"tip": None}, "tip"),
    ({"required_runner_pool": "ab"}, "required_runner_pool"),
    ({"required_runner_pool": "0xabc"}, "required_runner_pool"),
    ({"required_runner_pool": "0xa b"}, "required_runner_pool"),
    ({"callback": {"actor": "0x1234", "handler": "h"}}, "callback.actor"),
    ({"job_type": {"kind": "teleport"}}, "job_type.kind"),
    ({"job_type": {"kind": "llm", "model_id": "0x00", "prompt": "p", "max_tokens": 1}}, "job_type.model_id"),
    ({"job_type": {"kind": "llm", "model_id": "0x" + "00" * 32, "prompt": "p"}}, "job_type.max_tokens"),
    ({"job_type": {"kind": "mcp", "server": "s", "tool_name": "t", "arguments": {"x": float("nan")}}},
     "job_type.arguments.x"),
    ({"verification": {"mode": "vibes"}}, "verification.mode"),
    ({"verification": {"checks": [{"kind": "numeric_range", "field": "p", "min": "0", "max": 1}]}},
     "verification.checks[0].min"),
    ({"attachments": ["0x01"]}, "attachments[0]"),
    ({"attachments": ["0x1800"]}, "attachments[0]"),
])
def test_bad_values_are_errors_naming_the_path(change: dict[str, Any], path: str) -> None:
    doc = copy.deepcopy(MINIMAL)
    doc.update(change)
    assert _error(doc).message.startswith(f"{path}: ")


def test_missing_required_fields_and_non_objects_are_errors() -> None:
    assert _error({"job_type": MINIMAL["job_type"]}).message.startswith("max_price: missing")
    assert _error({"max_price": 1}).message.startswith("job_type: missing")
    assert _error([]).code == "invalid_job_spec"
    assert _error({**MINIMAL, "job_type": {"kind": "http", "url": "https://a.io/",
                                           "headers": {"A": 1}}}).message.startswith("job_type.headers.A: ")


def test_attachments_round_trip_as_hex_of_canonical_cbor_maps() -> None:
    req = parse_job_request_json({**MINIMAL, "attachments": ["0xa10001"]})
    assert req.attachments == ({0: 1},)
    assert job_request_to_json(req)["attachments"] == ["0xa10001"]
