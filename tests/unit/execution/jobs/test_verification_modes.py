"""verify(): each verification mode with agreeing, disagreeing and partially revealed committees
(docs/verification.md §5; CIP-11 §9.4 consensus-matching set)."""

from __future__ import annotations

import json

import pytest

from cowboy_node.execution.jobs.verification import (
    MODE_DETERMINISTIC,
    MODE_ECONOMIC_BOND,
    MODE_MAJORITY_VOTE,
    MODE_NONE,
    MODE_SEMANTIC_SIMILARITY,
    MODE_STRUCTURED_MATCH,
    Check,
    Reveal,
    Verdict,
    VerificationParams,
    verify,
)

A, B, C, D, E = (bytes([i]) * 20 for i in (0xA, 0xB, 0xC, 0xD, 0xE))
MV, SCHEMA, SM, TOL, RANGE = 0, 1, 2, 3, 4


def _reveals(*pairs: tuple[bytes, bytes | str]) -> tuple[Reveal, ...]:
    return tuple(Reveal(r, res.encode() if isinstance(res, str) else res, 1) for r, res in pairs)


def _v(mode: int, runners: int, threshold: int, *pairs: tuple[bytes, bytes | str],
       checks: tuple[Check, ...] = ()) -> Verdict:
    return verify(VerificationParams(mode, runners, threshold, checks), _reveals(*pairs))


def _ok(v: Verdict, result: bytes | str, matching: tuple[bytes, ...], outliers: tuple[bytes, ...] = ()) -> None:
    expected = result.encode() if isinstance(result, str) else result
    assert v == Verdict(ok=True, result=expected, matching=matching, outliers=outliers, reason="verified")


def _fail(v: Verdict, reason: str, outliers: tuple[bytes, ...] = ()) -> None:
    assert v == Verdict(ok=False, result=None, matching=(), outliers=outliers, reason=reason)


# ------------------------------------------------------------------ none / economic_bond

@pytest.mark.parametrize("mode", [MODE_NONE, MODE_ECONOMIC_BOND])
def test_single_runner_modes_the_single_reveal_wins(mode: int) -> None:
    _ok(_v(mode, 1, 1, (A, b"\x00anything")), b"\x00anything", (A,))


@pytest.mark.parametrize("mode", [MODE_NONE, MODE_ECONOMIC_BOND])
def test_single_runner_modes_without_reveal_fail(mode: int) -> None:
    _fail(_v(mode, 1, 1), "no_reveal")


@pytest.mark.parametrize("mode", [MODE_NONE, MODE_ECONOMIC_BOND])
def test_single_runner_modes_apply_admission_checks(mode: int) -> None:
    checks = (Check(SCHEMA, schema='{"type": "object", "required": ["x"]}'),)
    _fail(_v(mode, 1, 1, (A, '{"y": 1}'), checks=checks), "schema_invalid", (A,))
    _fail(_v(mode, 1, 1, (A, "not json"), checks=checks), "not_json", (A,))
    _ok(_v(mode, 1, 1, (A, '{"x": 1}'), checks=checks), '{"x": 1}', (A,))


def test_single_runner_mode_with_extra_reveals_takes_the_first_in_committee_order() -> None:
    _ok(_v(MODE_NONE, 1, 1, (B, "b"), (A, "a")), "b", (B,), (A,))


# ------------------------------------------------------------------ majority_vote

def test_majority_vote_agreeing_committee() -> None:
    _ok(_v(MODE_MAJORITY_VOTE, 3, 2, (A, "x"), (B, "x"), (C, "x")), "x", (A, B, C))


def test_majority_vote_largest_group_wins_and_the_rest_are_outliers() -> None:
    _ok(_v(MODE_MAJORITY_VOTE, 3, 2, (A, "y"), (B, "x"), (C, "x")), "x", (B, C), (A,))
    _ok(_v(MODE_MAJORITY_VOTE, 5, 2, (A, "x"), (B, "y"), (C, "z"), (D, "y"), (E, "x2")), "y", (B, D), (A, C, E))


def test_majority_vote_threshold_edges() -> None:
    committee = ((A, "x"), (B, "x"), (C, "y"))
    _ok(_v(MODE_MAJORITY_VOTE, 3, 2, *committee), "x", (A, B), (C,))  # exactly threshold
    _fail(_v(MODE_MAJORITY_VOTE, 3, 3, *committee), "below_threshold")  # one less than threshold


def test_majority_vote_ties_are_not_a_majority() -> None:
    _fail(_v(MODE_MAJORITY_VOTE, 2, 1, (A, "x"), (B, "y")), "no_majority")
    _fail(_v(MODE_MAJORITY_VOTE, 4, 2, (A, "x"), (B, "y"), (C, "y"), (D, "x")), "no_majority")
    _ok(_v(MODE_MAJORITY_VOTE, 3, 1, (A, "x"), (B, "y"), (C, "y")), "y", (B, C), (A,))


def test_majority_vote_partially_revealed_committee() -> None:
    _ok(_v(MODE_MAJORITY_VOTE, 3, 2, (A, "x"), (C, "x")), "x", (A, C))  # B never revealed
    _fail(_v(MODE_MAJORITY_VOTE, 3, 2, (B, "x")), "below_threshold")
    _fail(_v(MODE_MAJORITY_VOTE, 3, 2), "no_reveal")


def test_majority_vote_without_field_compares_exact_bytes() -> None:
    _fail(_v(MODE_MAJORITY_VOTE, 2, 1, (A, '{"a":1}'), (B, '{ "a":1}')), "no_majority")


def test_majority_vote_field_groups_by_json_value() -> None:
    checks = (Check(MV, field="answer"),)
    v = _v(MODE_MAJORITY_VOTE, 3, 2, (A, '{"answer": "yes", "t": 1}'), (B, '{"t": 2, "answer": "yes"}'),
           (C, '{"answer": "no"}'), checks=checks)
    _ok(v, '{"answer": "yes", "t": 1}', (A, B), (C,))  # the first matching member's bytes win
    numbers = _v(MODE_MAJORITY_VOTE, 2, 2, (A, '{"answer": 1}'), (B, '{"answer": 1.0}'), checks=checks)
    _ok(numbers, '{"answer": 1}', (A, B))
    _fail(_v(MODE_MAJORITY_VOTE, 2, 2, (A, '{"answer": 1}'), (B, '{"answer": true}'), checks=checks),
          "below_threshold")


def test_majority_vote_field_requires_strict_json_with_the_field() -> None:
    checks = (Check(MV, field="answer"),)
    v = _v(MODE_MAJORITY_VOTE, 4, 2, (A, "garbage"), (B, '{"answer": 2}'), (C, '{"other": 2}'),
           (D, '{"answer": 2.0}'), checks=checks)
    _ok(v, '{"answer": 2}', (B, D), (A, C))
    _fail(_v(MODE_MAJORITY_VOTE, 2, 1, (A, "garbage"), (B, '{"x": 1, "x": 2}'), checks=checks), "not_json", (A, B))


def test_majority_vote_admission_failures_are_outliers_even_without_majority() -> None:
    checks = (Check(SCHEMA, schema='{"type": "integer"}'),)
    v = _v(MODE_MAJORITY_VOTE, 3, 1, (A, "1"), (B, "2"), (C, '"three"'), checks=checks)
    _fail(v, "no_majority", (C,))


# ------------------------------------------------------------------ deterministic

def test_deterministic_all_identical_at_threshold_passes() -> None:
    _ok(_v(MODE_DETERMINISTIC, 3, 3, (A, "r"), (B, "r"), (C, "r")), "r", (A, B, C))
    _ok(_v(MODE_DETERMINISTIC, 3, 2, (A, "r"), (C, "r")), "r", (A, C))  # partial, exactly threshold


def test_deterministic_below_threshold_fails() -> None:
    _fail(_v(MODE_DETERMINISTIC, 3, 3, (A, "r"), (C, "r")), "below_threshold")


def test_deterministic_any_difference_fails_without_blame() -> None:
    _fail(_v(MODE_DETERMINISTIC, 4, 2, (A, "r"), (B, "r"), (C, "r"), (D, "r ")), "results_differ")


def test_deterministic_identical_but_inadmissible_results_fail() -> None:
    checks = (Check(RANGE, field="", minimum=0, maximum=10),)
    _fail(_v(MODE_DETERMINISTIC, 2, 2, (A, "11"), (B, "11"), checks=checks), "out_of_range", (A, B))
    _ok(_v(MODE_DETERMINISTIC, 2, 2, (A, "10"), (B, "10"), checks=checks), "10", (A, B))


# ------------------------------------------------------------------ structured_match

def test_structured_match_fields_define_agreement() -> None:
    checks = (Check(SM, fields=("price", "meta.symbol")),)
    v = _v(MODE_STRUCTURED_MATCH, 3, 2, (A, '{"price": 5, "meta": {"symbol": "X"}, "ts": 1}'),
           (B, '{"meta": {"symbol": "X"}, "price": 5.0, "ts": 2}'), (C, '{"price": 6, "meta": {"symbol": "X"}}'),
           checks=checks)
    _ok(v, '{"price": 5, "meta": {"symbol": "X"}, "ts": 1}', (A, B), (C,))


def test_structured_match_without_agreement_checks_compares_whole_json_values() -> None:
    _ok(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"a": 1, "b": [2]}'), (B, '{"b": [2.0], "a": 1}')),
        '{"a": 1, "b": [2]}', (A, B))
    _fail(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"a": 1}'), (B, '{"a": 1, "b": null}')), "below_threshold")


def test_structured_match_results_must_be_json_objects() -> None:
    checks = (Check(SM, fields=("a",)),)
    v = _v(MODE_STRUCTURED_MATCH, 4, 2, (A, "[1]"), (B, '{"a": 1}'), (C, "nope"), (D, '{"a": 1}'), checks=checks)
    _ok(v, '{"a": 1}', (B, D), (A, C))
    _fail(_v(MODE_STRUCTURED_MATCH, 2, 1, (A, "[1]"), (B, "x"), checks=checks), "not_json_object", (A, B))
    _fail(_v(MODE_STRUCTURED_MATCH, 2, 1, (A, '{"b": 1}'), checks=checks), "field_missing", (A,))


def test_structured_match_ties_go_to_the_earliest_cluster() -> None:
    checks = (Check(SM, fields=("a",)),)
    _ok(_v(MODE_STRUCTURED_MATCH, 2, 1, (A, '{"a": 1}'), (B, '{"a": 2}'), checks=checks), '{"a": 1}', (A,), (B,))
    v = _v(MODE_STRUCTURED_MATCH, 4, 2, (A, '{"a": 2}'), (B, '{"a": 1}'), (C, '{"a": 1}'), (D, '{"a": 2}'),
           checks=checks)
    _ok(v, '{"a": 2}', (A, D), (B, C))
    # a strictly larger later cluster still wins
    _ok(_v(MODE_STRUCTURED_MATCH, 3, 1, (A, '{"a": 1}'), (B, '{"a": 2}'), (C, '{"a": 2}'), checks=checks),
        '{"a": 2}', (B, C), (A,))


def test_structured_match_threshold_edges() -> None:
    checks = (Check(SM, fields=("a",)),)
    committee = ((A, '{"a": 1}'), (B, '{"a": 1}'), (C, '{"a": 3}'))
    _ok(_v(MODE_STRUCTURED_MATCH, 3, 2, *committee, checks=checks), '{"a": 1}', (A, B), (C,))
    _fail(_v(MODE_STRUCTURED_MATCH, 3, 3, *committee, checks=checks), "below_threshold")
    _fail(_v(MODE_STRUCTURED_MATCH, 3, 2, committee[0], checks=checks), "below_threshold")  # partial reveal


def test_numeric_tolerance_equal_to_tolerance_agrees() -> None:
    checks = (Check(TOL, field="v", tolerance=0.25),)
    _ok(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"v": 1.0}'), (B, '{"v": 1.25}'), checks=checks), '{"v": 1.0}', (A, B))
    _ok(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"v": 1.25}'), (B, '{"v": 1}'), checks=checks), '{"v": 1.25}', (A, B))


def test_numeric_tolerance_just_beyond_tolerance_disagrees() -> None:
    checks = (Check(TOL, field="v", tolerance=0.25),)
    # 1.2500000000000002 is the next float64 above 1.25
    _fail(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"v": 1.0}'), (B, '{"v": 1.2500000000000002}'), checks=checks),
          "below_threshold")
    ints = (Check(TOL, field="v", tolerance=2),)
    _ok(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"v": 10}'), (B, '{"v": 12}'), checks=ints), '{"v": 10}', (A, B))
    _fail(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"v": 10}'), (B, '{"v": 13}'), checks=ints), "below_threshold")
    _fail(_v(MODE_STRUCTURED_MATCH, 2, 2, (A, '{"v": 10}'), (B, '{"v": 7}'), checks=ints), "below_threshold")


def test_numeric_tolerance_is_measured_against_the_clusters_first_member() -> None:
    checks = (Check(TOL, field="v", tolerance=1),)
    # B is within 1 of A; C is within 1 of B but 2 from A: C starts its own cluster.
    v = _v(MODE_STRUCTURED_MATCH, 3, 2, (A, '{"v": 0}'), (B, '{"v": 1}'), (C, '{"v": 2}'), checks=checks)
    _ok(v, '{"v": 0}', (A, B), (C,))
    # with C first in committee order, the clusters are {C, B} and {A}
    v = _v(MODE_STRUCTURED_MATCH, 3, 2, (C, '{"v": 2}'), (B, '{"v": 1}'), (A, '{"v": 0}'), checks=checks)
    _ok(v, '{"v": 2}', (C, B), (A,))


def test_numeric_tolerance_needs_a_number() -> None:
    checks = (Check(TOL, field="v", tolerance=1),)
    v = _v(MODE_STRUCTURED_MATCH, 3, 2, (A, '{"v": "1"}'), (B, '{"v": 1}'), (C, '{"v": 1}'), checks=checks)
    _ok(v, '{"v": 1}', (B, C), (A,))
    _fail(_v(MODE_STRUCTURED_MATCH, 1, 1, (A, '{"v": true}'), checks=checks), "not_numeric", (A,))


def test_numeric_range_is_inclusive_admission() -> None:
    checks = (Check(RANGE, field="p", minimum=1.5, maximum=3), Check(SM, fields=("k",)))
    committee = ((A, '{"k": 1, "p": 1.5}'), (B, '{"k": 1, "p": 3}'), (C, '{"k": 1, "p": 3.0000000000000004}'),
                 (D, '{"k": 1, "p": 1.4999999999999998}'), (E, '{"k": 1, "p": "2"}'))
    _ok(_v(MODE_STRUCTURED_MATCH, 5, 2, *committee, checks=checks), '{"k": 1, "p": 1.5}', (A, B), (C, D, E))
    _fail(_v(MODE_STRUCTURED_MATCH, 1, 1, committee[2], checks=checks), "out_of_range", (C,))
    _fail(_v(MODE_STRUCTURED_MATCH, 1, 1, committee[4], checks=checks), "not_numeric", (E,))
    _fail(_v(MODE_STRUCTURED_MATCH, 1, 1, (A, '{"k": 1}'), checks=checks), "field_missing", (A,))


def test_structured_match_schema_failures_are_outliers_even_when_fields_agree() -> None:
    checks = (Check(SCHEMA, schema='{"required": ["k", "sig"]}'), Check(SM, fields=("k",)))
    v = _v(MODE_STRUCTURED_MATCH, 3, 2, (A, '{"k": 1}'), (B, '{"k": 1, "sig": 0}'), (C, '{"k": 1, "sig": 1}'),
           checks=checks)
    _ok(v, '{"k": 1, "sig": 0}', (B, C), (A,))


def test_structured_match_majority_vote_field_also_defines_agreement() -> None:
    checks = (Check(SM, fields=("a",)), Check(MV, field="b"))
    v = _v(MODE_STRUCTURED_MATCH, 3, 2, (A, '{"a": 1, "b": 1}'), (B, '{"a": 1, "b": 2}'), (C, '{"a": 1, "b": 2}'),
           checks=checks)
    _ok(v, '{"a": 1, "b": 2}', (B, C), (A,))


def test_majority_vote_mode_ignores_structured_match_and_tolerance_checks() -> None:
    checks = (Check(SM, fields=("a",)), Check(TOL, field="a", tolerance=100))
    _fail(_v(MODE_MAJORITY_VOTE, 2, 1, (A, '{"a": 1}'), (B, '{"a": 2}'), checks=checks), "no_majority")


def test_check_budget_exhaustion_excludes_the_result_without_penalty() -> None:
    # 100,000 elements × 4 steps (items + 3 anyOf branches) exceed SCHEMA_STEP_BUDGET (200,000 steps).
    checks = (Check(SCHEMA, schema='{"items": {"anyOf": [{"type": "string"}, {"type": "null"}, {}]}}'),)
    huge = "[" + ",".join(["1"] * 100_000) + "]"
    v = _v(MODE_MAJORITY_VOTE, 3, 2, (A, "[1]"), (B, huge), (C, "[1]"), checks=checks)
    _ok(v, "[1]", (A, C))  # B is neither matching nor an outlier
    _fail(_v(MODE_NONE, 1, 1, (B, huge), checks=checks), "check_budget_exceeded")


# ------------------------------------------------------------------ refusals and caller errors

def test_verify_refuses_modes_and_checks_it_cannot_evaluate() -> None:
    _fail(_v(MODE_SEMANTIC_SIMILARITY, 3, 2, (A, "x"), (B, "x")), "unsupported_mode")
    _fail(_v(9, 3, 2, (A, "x"), (B, "x")), "unsupported_mode")
    for kind in (5, 6, 7, 8):
        _fail(_v(MODE_MAJORITY_VOTE, 2, 1, (A, "x"), (B, "x"), checks=(Check(kind),)), "check_invalid")
    _fail(_v(MODE_NONE, 1, 1, (A, "x"), checks=(Check(SCHEMA, schema='{"pattern": "a+"}'),)), "check_invalid")


def test_verify_rejects_a_runner_revealing_twice() -> None:
    with pytest.raises(ValueError):
        _v(MODE_MAJORITY_VOTE, 2, 1, (A, "x"), (A, "x"))


def test_threshold_below_one_counts_as_one() -> None:
    _ok(_v(MODE_MAJORITY_VOTE, 1, 0, (A, "x")), "x", (A,))
    _ok(_v(MODE_STRUCTURED_MATCH, 1, 0, (A, "{}")), "{}", (A,))


def test_verdict_result_is_the_first_matching_members_bytes() -> None:
    a = json.dumps({"v": 1, "pad": " " * 3})
    b = json.dumps({"pad": "", "v": 1})
    checks = (Check(SM, fields=("v",)),)
    _ok(_v(MODE_STRUCTURED_MATCH, 2, 2, (B, b), (A, a), checks=checks), b, (B, A))
