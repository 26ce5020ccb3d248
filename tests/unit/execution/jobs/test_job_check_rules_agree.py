"""The submission rules (types/jobspec_checks) and the verifier's rules (execution/jobs/verification, checks)
must agree: a job accepted at submission is one the verifier can evaluate at conclusion, so escrowed jobs
never end in an "unverifiable" state because of their own spec.

The JobSubmit executor runs both rule sets (``executors.validate``, defence in depth); the property test pins
that, over generated configurations, acceptance by the submission rules implies the verifier's rules accept
too and its plan builds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs import executors, results
from cowboy_node.execution.jobs.checks import build_plan
from cowboy_node.execution.jobs.verification import MODE_MAJORITY_VOTE, MODE_STRUCTURED_MATCH, check_params
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_protocol.types.jobspec import JobRequest
from cowboy_protocol.types.jobspec_checks import (
    JsonSchemaValidCheck,
    MajorityVoteCheck,
    NumericRangeCheck,
    NumericToleranceCheck,
    StructuredMatchCheck,
    VerificationConfig,
    VerificationMode,
    validate_verification,
)
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.validation_errors import ValidationError
from tests.unit.eob_helpers import make_world

EXAMPLE = Path(__file__).resolve().parents[4] / "configs" / "examples" / "job-http.json"


def http_request(verification: VerificationConfig) -> JobRequest:
    """The example HTTP job with ``verification`` swapped in."""
    return replace(parse_job_request_json(json.loads(EXAMPLE.read_text())), verification=verification)


FIELDS = st.sampled_from(["", "a", "a.b", "price", "x.0.y"])
CHECKS = st.one_of(
    st.builds(MajorityVoteCheck, field=FIELDS),
    st.builds(JsonSchemaValidCheck, schema=st.sampled_from(['{"type":"object"}', '{"type":"number"}'])),
    st.builds(StructuredMatchCheck, fields=st.lists(FIELDS.filter(bool), min_size=0, max_size=3).map(tuple)),
    st.builds(NumericToleranceCheck, field=FIELDS, tolerance=st.sampled_from([0.0, 0.5, 2.0])),
    st.builds(NumericRangeCheck, field=FIELDS, min=st.sampled_from([0.0, 1.0]), max=st.sampled_from([1.0, 9.0])),
)
MODES = st.sampled_from([m for m in VerificationMode if m != VerificationMode.SEMANTIC_SIMILARITY])


@settings(max_examples=400, deadline=None)
@given(mode=MODES, runners=st.integers(1, 7), threshold=st.integers(1, 7), checks=st.lists(CHECKS, max_size=4))
def test_config_accepted_at_submission_is_verifiable(mode: VerificationMode, runners: int, threshold: int,
                                                     checks: list[object]) -> None:
    cfg = VerificationConfig(mode=mode, runners=runners, threshold=threshold, checks=tuple(checks))  # type: ignore[arg-type]
    try:
        validate_verification(cfg)
    except ValidationError:
        return  # refused at submission: nothing to evaluate later
    params = results.verification_params_of(cfg)
    check_params(params)  # the verifier's own submission-time rules accept it too
    plan = build_plan(params.checks, agreement=params.mode in (MODE_MAJORITY_VOTE, MODE_STRUCTURED_MATCH),
                      structured=params.mode == MODE_STRUCTURED_MATCH)
    assert plan is not None


def test_structured_match_with_no_fields_is_refused_at_submission() -> None:
    """The verifier needs 1..N fields in a structured_match check; submission refuses an empty one."""
    cfg = VerificationConfig(mode=VerificationMode.STRUCTURED_MATCH, runners=3, threshold=2,
                             checks=(StructuredMatchCheck(fields=()),))
    req = http_request(verification=cfg)
    with pytest.raises(TxFailed) as e:
        executors.validate(make_world(), req)
    assert e.value.code in ("job_checks_invalid", "job_check_invalid")


def test_majority_vote_threshold_must_exceed_half() -> None:
    cfg = VerificationConfig(mode=VerificationMode.MAJORITY_VOTE, runners=4, threshold=2)
    with pytest.raises(TxFailed) as e:
        executors.validate(make_world(), http_request(verification=cfg))
    assert e.value.code == "job_threshold_invalid"
