"""Submission-time refusals for verification parameters and verifier checks (docs/verification.md §4)."""

from __future__ import annotations

import pytest

from cowboy_node.execution.jobs.checks import CHECK_KINDS, MAX_CHECKS, MAX_FIELD_BYTES, validate_check
from cowboy_node.execution.jobs.verification import MODES, Check, VerificationParams, check_params
from cowboy_node.types.errors import ValidationError


def _refused(params: VerificationParams) -> None:
    with pytest.raises(ValidationError) as info:
        check_params(params)
    assert info.value.code == "job_check_invalid"


def test_mode_and_check_kind_bytes_are_pinned() -> None:
    assert MODES == {"none": 0, "economic_bond": 1, "majority_vote": 2, "structured_match": 3,
                     "deterministic": 4, "semantic_similarity": 5}
    assert CHECK_KINDS == {"majority_vote": 0, "json_schema_valid": 1, "structured_match": 2,
                           "numeric_tolerance": 3, "numeric_range": 4, "custom": 5,
                           "dns_txt_record_match": 6, "dns_cname_match": 7}


def test_check_params_accepts_supported_configurations() -> None:
    check_params(VerificationParams(0, 1, 1))
    check_params(VerificationParams(1, 1, 1))
    check_params(VerificationParams(2, 3, 2, (Check(0, field="answer"),)))
    check_params(VerificationParams(3, 5, 3, (Check(1, schema='{"type": "object"}'), Check(2, fields=("a", "b.c")),
                                              Check(3, field="v", tolerance=0.0), Check(4, field="p", minimum=-1,
                                                                                        maximum=-1))))
    check_params(VerificationParams(4, 2, 2))


def test_check_params_refuses_semantic_similarity_and_unknown_modes() -> None:
    _refused(VerificationParams(5, 3, 2))
    _refused(VerificationParams(6, 3, 2))


@pytest.mark.parametrize("kind", [5, 6, 7, 8])
def test_check_params_refuses_custom_and_dns_checks(kind: int) -> None:
    _refused(VerificationParams(2, 3, 2, (Check(kind),)))


def test_check_params_threshold_and_runner_bounds() -> None:
    _refused(VerificationParams(2, 0, 0))
    _refused(VerificationParams(2, 3, 0))
    _refused(VerificationParams(2, 3, 4))
    check_params(VerificationParams(2, 3, 3))
    _refused(VerificationParams(0, 2, 1))
    _refused(VerificationParams(1, 3, 1))


@pytest.mark.parametrize("check", [
    Check(1, schema='{"pattern": "^a+$"}'),
    Check(1, schema="not json"),
    Check(2, fields=()),
    Check(2, fields=tuple(f"f{i}" for i in range(65))),
    Check(2, fields=("a..b",)),
    Check(0, field="a."),
    Check(3, field="v", tolerance=-0.5),
    Check(3, field="v", tolerance=float("nan")),
    Check(3, field="v", tolerance=float("inf")),
    Check(4, field="p", minimum=2, maximum=1),
    Check(4, field="p", minimum=float("-inf"), maximum=1),
    Check(4, field="x" * (MAX_FIELD_BYTES + 1)),
])
def test_validate_check_refuses_malformed_checks(check: Check) -> None:
    with pytest.raises(ValidationError) as info:
        validate_check(check)
    assert info.value.code == "job_check_invalid"


def test_check_count_limit() -> None:
    check_params(VerificationParams(2, 3, 2, (Check(0),) * MAX_CHECKS))
    _refused(VerificationParams(2, 3, 2, (Check(0),) * (MAX_CHECKS + 1)))
