"""Submission-time checks of verification parameters and verifier checks (docs/verification.md §4); accepted
parameters give the verdicts of §5."""

from __future__ import annotations

import pytest

from cowboy_node.execution.jobs.checks import CHECK_KINDS, MAX_CHECKS, MAX_FIELD_BYTES, validate_check
from cowboy_node.execution.jobs.verification import (
    MODES,
    Check,
    Reveal,
    Verdict,
    VerificationParams,
    check_params,
    verify,
)
from cowboy_protocol.types.validation_errors import ValidationError

A, B, C, D, E = (bytes([i]) * 20 for i in range(1, 6))  # runner addresses, listed in committee order


def _reveals(*results: bytes) -> tuple[Reveal, ...]:
    """One reveal per result, from runners A, B, C, … in committee order."""
    return tuple(Reveal(runner, result, 1) for runner, result in zip((A, B, C, D, E), results, strict=False))


def _accepted(params: VerificationParams) -> VerificationParams:
    """check_params returns None (docs/verification.md §1: it only raises); hand the params on to verify()."""
    check_params(params)
    return params


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
    # §5.1 none / economic_bond: the one admitted reveal wins; with no checks nothing needs to be JSON (§4 step 1)
    for mode in (0, 1):
        verdict = verify(_accepted(VerificationParams(mode, 1, 1)), _reveals(b"any bytes"))
        assert verdict == Verdict(ok=True, result=b"any bytes", matching=(A,), outliers=(), reason="verified")

    # §5.2 majority_vote on "answer": 42 and 42.0 are equal JSON values (§2), other members are not compared;
    # the group of 2 reaches threshold 2, the result is its first member's bytes (§5.5), the dissenter is an outlier
    majority = _accepted(VerificationParams(2, 3, 2, (Check(0, field="answer"),)))
    results = (b'{"answer": 42, "note": "a"}', b'{"answer": 41}', b'{"note": "c", "answer": 42.0}')
    assert verify(majority, _reveals(*results)) == Verdict(ok=True, result=results[0], matching=(A, C),
                                                           outliers=(B,), reason="verified")

    # §5.4 structured_match: A, B and D agree on a, b.c and v (|2 − 2.0| ≤ 0, equal to the tolerance agrees);
    # C differs at b.c; E fails numeric_range p in [-1, -1] at admission (out_of_range). The cluster of 3 meets
    # threshold 3; C and E are outliers, in committee order.
    structured = _accepted(VerificationParams(3, 5, 3, (
        Check(1, schema='{"type": "object"}'), Check(2, fields=("a", "b.c")), Check(3, field="v", tolerance=0.0),
        Check(4, field="p", minimum=-1, maximum=-1))))
    documents = (b'{"a": 1, "b": {"c": "x"}, "v": 2, "p": -1}',
                 b'{"p": -1.0, "v": 2.0, "b": {"c": "x"}, "a": 1, "extra": true}',
                 b'{"a": 1, "b": {"c": "y"}, "v": 2, "p": -1}',
                 b'{"a": 1, "b": {"c": "x"}, "v": 2, "p": -1}',
                 b'{"a": 1, "b": {"c": "x"}, "v": 2, "p": 0}')
    assert verify(structured, _reveals(*documents)) == Verdict(ok=True, result=documents[0], matching=(A, B, D),
                                                               outliers=(C, E), reason="verified")

    # §5.3 deterministic: identical bytes from both runners, threshold 2 met: all revealed runners match
    deterministic = _accepted(VerificationParams(4, 2, 2))
    assert verify(deterministic, _reveals(b"r", b"r")) == Verdict(ok=True, result=b"r", matching=(A, B),
                                                                  outliers=(), reason="verified")


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
    unanimous = _accepted(VerificationParams(2, 3, 3))
    # threshold = runners: a group of 2 out of 3 is below_threshold (§5.2); a failed verdict names no outliers
    # when nothing was rejected at admission (§5, Outliers)
    assert verify(unanimous, _reveals(b"x", b"x", b"y")) == Verdict(ok=False, result=None, matching=(), outliers=(),
                                                                    reason="below_threshold")
    assert verify(unanimous, _reveals(b"x", b"x", b"x")) == Verdict(ok=True, result=b"x", matching=(A, B, C),
                                                                    outliers=(), reason="verified")
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
    most = _accepted(VerificationParams(2, 3, 2, (Check(0),) * MAX_CHECKS))
    # majority_vote checks without a field group by identical bytes (§4 Agreement)
    assert verify(most, _reveals(b"x", b"y", b"x")) == Verdict(ok=True, result=b"x", matching=(A, C), outliers=(B,),
                                                               reason="verified")
    _refused(VerificationParams(2, 3, 2, (Check(0),) * (MAX_CHECKS + 1)))
