"""Result verification (CIP-2 settlement as used by CIP-11 §9.4, §10.3): which revealed results win.

:func:`verify` is a pure function of the job's verification parameters and its
reveals in committee order (the order the dispatcher selected the runners).
It returns the winning result, the consensus-matching runners (CIP-11 §9.4:
they are paid, rewarded, and the first of them becomes the MRU runner) and the
outliers (revealed, but not in the winning set: reputation penalty). Every rule
is written out in docs/verification.md; nothing depends on arrival order, dict
or set iteration order, the clock or the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.execution.jobs.checks import (
    CHECK_BUDGET_EXCEEDED,
    Candidate,
    Check,
    Plan,
    Rejected,
    admit,
    agrees,
    build_plan,
    validate_checks,
)
from cowboy_protocol.types.errors import ValidationError

__all__ = [
    "CHECK_BUDGET_EXCEEDED",
    "MODES",
    "MODE_DETERMINISTIC",
    "MODE_ECONOMIC_BOND",
    "MODE_MAJORITY_VOTE",
    "MODE_NONE",
    "MODE_SEMANTIC_SIMILARITY",
    "MODE_STRUCTURED_MATCH",
    "Check",
    "Reveal",
    "Verdict",
    "VerificationParams",
    "check_params",
    "verify",
]

MODE_NONE = 0
MODE_ECONOMIC_BOND = 1
MODE_MAJORITY_VOTE = 2
MODE_STRUCTURED_MATCH = 3
MODE_DETERMINISTIC = 4
MODE_SEMANTIC_SIMILARITY = 5
MODES: dict[str, int] = {
    "none": MODE_NONE, "economic_bond": MODE_ECONOMIC_BOND, "majority_vote": MODE_MAJORITY_VOTE,
    "structured_match": MODE_STRUCTURED_MATCH, "deterministic": MODE_DETERMINISTIC,
    "semantic_similarity": MODE_SEMANTIC_SIMILARITY,
}
"""CIP-11 §12.6 VerificationConfigV1 mode bytes (append only)."""
SINGLE_RUNNER_MODES = frozenset({MODE_NONE, MODE_ECONOMIC_BOND})
"""Modes settled by one runner's result."""
SUPPORTED_MODES = frozenset({MODE_NONE, MODE_ECONOMIC_BOND, MODE_MAJORITY_VOTE, MODE_STRUCTURED_MATCH,
                             MODE_DETERMINISTIC})
"""Modes :func:`verify` evaluates (semantic_similarity needs a model: refused at submission)."""

# Stable verdict reasons (besides the admission codes of checks.py, used when no result is admitted).
VERIFIED = "verified"
NO_REVEAL = "no_reveal"
NO_MAJORITY = "no_majority"
RESULTS_DIFFER = "results_differ"
BELOW_THRESHOLD = "below_threshold"
UNSUPPORTED_MODE = "unsupported_mode"
CHECK_INVALID = "check_invalid"


@dataclass(frozen=True, slots=True)
class VerificationParams:
    """The verification part of a job spec (VerificationConfigV1 fields 0..3)."""

    mode: int
    """Mode byte (:data:`MODES`)."""
    runners: int
    """Committee size."""
    threshold: int
    """Fewest agreeing results for a verified outcome (values below 1 count as 1)."""
    checks: tuple[Check, ...] = ()
    """Verifier checks, in spec order."""


@dataclass(frozen=True, slots=True)
class Reveal:
    """One accepted reveal (its commitment already matched)."""

    runner: bytes
    """Runner address."""
    result: bytes
    """Revealed result bytes."""
    units: int
    """Usage units the runner reports (priced by payment.usage_price)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of :func:`verify`."""

    ok: bool
    """True iff a result is verified."""
    result: bytes | None
    """Winning result bytes (the first matching runner's), or None."""
    matching: tuple[bytes, ...]
    """Consensus-matching runners, in committee order (empty unless ok)."""
    outliers: tuple[bytes, ...]
    """Revealed runners outside the winning set (reputation penalty), in committee order."""
    reason: str
    """Stable code: ``verified`` or why not."""


def check_params(params: VerificationParams) -> None:
    """Submission-time check (``ValidationError("job_check_invalid")``): a mode and checks :func:`verify`
    evaluates, ``runners ≥ 1``, ``1 ≤ threshold ≤ runners``, and one runner for none/economic_bond."""
    if params.mode not in SUPPORTED_MODES:
        name = next((n for n, b in MODES.items() if b == params.mode), f"mode {params.mode}")
        raise ValidationError("job_check_invalid", f"verification mode {name} is not supported by this node",
                              field="mode")
    if params.runners < 1 or not 1 <= params.threshold <= params.runners:
        raise ValidationError("job_check_invalid", "need runners >= 1 and 1 <= threshold <= runners",
                              field="threshold")
    if params.mode in SINGLE_RUNNER_MODES and params.runners != 1:
        raise ValidationError("job_check_invalid", "modes none and economic_bond use exactly one runner",
                              field="runners")
    validate_checks(params.checks)


def _fail(reason: str, outliers: tuple[bytes, ...] = ()) -> Verdict:
    return Verdict(ok=False, result=None, matching=(), outliers=outliers, reason=reason)


def _win(reveals: tuple[Reveal, ...], winners: list[Reveal], exempt: set[bytes]) -> Verdict:
    chosen = {r.runner for r in winners}
    outliers = tuple(r.runner for r in reveals if r.runner not in chosen and r.runner not in exempt)
    return Verdict(ok=True, result=winners[0].result, matching=tuple(r.runner for r in winners),
                   outliers=outliers, reason=VERIFIED)


def verify(params: VerificationParams, reveals: tuple[Reveal, ...]) -> Verdict:
    """Decide a job's outcome from its reveals, given in committee order (runners that did not reveal are absent).

    Never raises for bad parameters or results (they give a not-ok verdict); raises ``ValueError`` only if a
    runner appears twice in ``reveals`` (a caller bug).
    """
    if len({r.runner for r in reveals}) != len(reveals):
        raise ValueError("a runner appears twice in reveals")
    mode = params.mode
    if mode not in SUPPORTED_MODES:
        return _fail(UNSUPPORTED_MODE)
    try:
        plan = build_plan(params.checks, agreement=mode in (MODE_MAJORITY_VOTE, MODE_STRUCTURED_MATCH),
                          structured=mode == MODE_STRUCTURED_MATCH)
    except ValidationError:
        return _fail(CHECK_INVALID)
    if not reveals:
        return _fail(NO_REVEAL)
    admitted: list[tuple[Reveal, Candidate]] = []
    rejected: list[tuple[Reveal, Rejected]] = []
    for r in reveals:
        outcome = admit(plan, r.result)
        if isinstance(outcome, Rejected):
            rejected.append((r, outcome))
        else:
            admitted.append((r, outcome))
    penalized = tuple(r.runner for r, rej in rejected if rej.penalize)
    exempt = {r.runner for r, rej in rejected if not rej.penalize}
    threshold = max(params.threshold, 1)

    if mode == MODE_DETERMINISTIC:
        if any(r.result != reveals[0].result for r in reveals):
            return _fail(RESULTS_DIFFER, penalized)
        if rejected:  # identical bytes: all were rejected, for the same reason
            return _fail(rejected[0][1].code, penalized)
        if len(reveals) < threshold:
            return _fail(BELOW_THRESHOLD)
        return _win(reveals, list(reveals), exempt)
    if not admitted:
        return _fail(rejected[0][1].code, penalized)
    if mode in SINGLE_RUNNER_MODES:
        return _win(reveals, [admitted[0][0]], exempt)
    if mode == MODE_MAJORITY_VOTE:
        return _majority(reveals, admitted, threshold, penalized, exempt)
    return _structured(plan, reveals, admitted, threshold, penalized, exempt)


def _majority(reveals: tuple[Reveal, ...], admitted: list[tuple[Reveal, Candidate]], threshold: int,
              penalized: tuple[bytes, ...], exempt: set[bytes]) -> Verdict:
    # Groups are kept in a list in order of first appearance (committee order), never iterated from a dict.
    groups: list[tuple[tuple[object, ...], list[Reveal]]] = []
    for r, cand in admitted:
        for key, members in groups:
            if key == cand.key:
                members.append(r)
                break
        else:
            groups.append((cand.key, [r]))
    sizes = [len(members) for _k, members in groups]
    best = max(sizes)
    if best < threshold:
        return _fail(BELOW_THRESHOLD, penalized)
    if sizes.count(best) > 1:
        return _fail(NO_MAJORITY, penalized)
    return _win(reveals, groups[sizes.index(best)][1], exempt)


def _structured(plan: Plan, reveals: tuple[Reveal, ...], admitted: list[tuple[Reveal, Candidate]],
                threshold: int, penalized: tuple[bytes, ...], exempt: set[bytes]) -> Verdict:
    # Greedy clustering in committee order: each result joins the first cluster whose representative
    # (first member) it agrees with. Agreement with a tolerance is not transitive, so order matters; the
    # only order used is the committee order.
    clusters: list[tuple[Candidate, list[Reveal]]] = []
    for r, cand in admitted:
        for rep, members in clusters:
            if agrees(plan, rep, cand):
                members.append(r)
                break
        else:
            clusters.append((cand, [r]))
    sizes = [len(members) for _rep, members in clusters]
    best = max(sizes)
    if best < threshold:
        return _fail(BELOW_THRESHOLD, penalized)
    return _win(reveals, clusters[sizes.index(best)][1], exempt)  # index(): earliest cluster wins ties
