"""verify() depends on the results and the committee order only (CIP-11 §9.4: arrival, reveal, delivery and
map-iteration order MUST NOT affect the consensus-matching set). Property tests against a written-out oracle."""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.verification import Check, Reveal, VerificationParams, verify

RUNNERS = [bytes([i + 1]) * 20 for i in range(8)]


@st.composite
def _majority_case(draw: st.DrawFn) -> tuple[list[bytes], int, list[int]]:
    n = draw(st.integers(1, 7))
    results = draw(st.lists(st.sampled_from([b"x", b"y", b"z"]), min_size=n, max_size=n))
    threshold = draw(st.integers(1, n))
    perm = draw(st.permutations(range(n)))
    return results, threshold, perm


@settings(max_examples=300, deadline=None)
@given(_majority_case())
def test_majority_vote_matches_oracle_and_ignores_which_runner_holds_which_result(
        case: tuple[list[bytes], int, list[int]]) -> None:
    results, threshold, perm = case
    params = VerificationParams(2, len(results), threshold)
    for assignment in (results, [results[i] for i in perm]):
        committee = RUNNERS[:len(assignment)]
        v = verify(params, tuple(Reveal(r, res, 1) for r, res in zip(committee, assignment, strict=True)))
        counts = Counter(assignment)
        best = max(counts.values())
        winners = [res for res, c in counts.items() if c == best]
        expected_ok = best >= threshold and len(winners) == 1
        assert v.ok == expected_ok
        if expected_ok:
            assert v.result == winners[0]
            assert v.matching == tuple(r for r, res in zip(committee, assignment, strict=True) if res == winners[0])
            assert v.outliers == tuple(r for r, res in zip(committee, assignment, strict=True) if res != winners[0])
            assert v.reason == "verified"
        else:
            assert v.matching == () and v.outliers == () and v.result is None
            assert v.reason == ("below_threshold" if best < threshold else "no_majority")


def _serialize(obj: dict[str, int], order: list[int], spaced: bool) -> bytes:
    keys = sorted(obj)
    keys = [keys[i] for i in order]
    sep = (", ", ": ") if spaced else (",", ":")
    return json.dumps({k: obj[k] for k in keys}, separators=sep).encode()


@st.composite
def _structured_case(draw: st.DrawFn) -> tuple[list[dict[str, int]], int, list[list[int]], list[bool]]:
    n = draw(st.integers(1, 7))
    objs = [{"k": draw(st.integers(0, 2)), "noise": draw(st.integers(0, 9)), "z": 0} for _ in range(n)]
    threshold = draw(st.integers(1, n))
    orders = [draw(st.permutations(range(3))) for _ in range(n)]
    spaced = [draw(st.booleans()) for _ in range(n)]
    return objs, threshold, orders, spaced


@settings(max_examples=300, deadline=None)
@given(_structured_case())
def test_structured_match_depends_on_values_and_committee_order_only(
        case: tuple[list[dict[str, int]], int, list[list[int]], list[bool]]) -> None:
    objs, threshold, orders, spaced = case
    params = VerificationParams(3, len(objs), threshold, (Check(2, fields=("k",)),))
    committee = RUNNERS[:len(objs)]
    plain = [_serialize(o, [0, 1, 2], False) for o in objs]
    shuffled = [_serialize(o, order, sp) for o, order, sp in zip(objs, orders, spaced, strict=True)]
    v1 = verify(params, tuple(Reveal(r, b, 1) for r, b in zip(committee, plain, strict=True)))
    v2 = verify(params, tuple(Reveal(r, b, 1) for r, b in zip(committee, shuffled, strict=True)))
    # Oracle: clusters by k in order of first appearance; the earliest largest cluster wins if >= threshold.
    firsts: list[int] = []
    for o in objs:
        if o["k"] not in firsts:
            firsts.append(o["k"])
    sizes = [sum(1 for o in objs if o["k"] == k) for k in firsts]
    best = max(sizes)
    win_k = firsts[sizes.index(best)]
    for v, blobs in ((v1, plain), (v2, shuffled)):
        assert v.ok == (best >= threshold)
        if v.ok:
            members = [i for i, o in enumerate(objs) if o["k"] == win_k]
            assert v.matching == tuple(committee[i] for i in members)
            assert v.outliers == tuple(committee[i] for i, o in enumerate(objs) if o["k"] != win_k)
            assert v.result == blobs[members[0]]  # the first matching member's own bytes
        else:
            assert v.reason == "below_threshold" and v.matching == ()
    assert (v1.ok, v1.matching, v1.outliers, v1.reason) == (v2.ok, v2.matching, v2.outliers, v2.reason)
