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
from cowboy_protocol.jobs.error_result import ErrorResult, decode_error_result
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

__all__ = [
    "CHECK_BUDGET_EXCEEDED",
    "ERROR_RESULT_INVALID",
    "MODES",
    "MODE_DETERMINISTIC",
    "MODE_ECONOMIC_BOND",
    "MODE_MAJORITY_VOTE",
    "MODE_NONE",
    "MODE_SEMANTIC_SIMILARITY",
    "MODE_STRUCTURED_MATCH",
    "RUNNER_ERROR_PREFIX",
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
RUNNER_ERROR_PREFIX = "runner_error:"
"""Reason prefix of a job failed by an error result: ``runner_error:<code>`` (docs/verification.md §5.7)."""
ERROR_RESULT_INVALID = "error_result_invalid"
"""Rejection code of a reveal that starts with the error-result magic but is not a well-formed envelope."""


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
    """Stable code: ``verified`` or why not (``runner_error:<code>`` when an error result won)."""
    error: bytes | None = None
    """The winning error result's bytes (first runner of the winning error group) when the verdict is a
    runner-reported failure (docs/jobs.md "Error results"); None otherwise."""


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


def _error_verdict(reveals: tuple[Reveal, ...], group: list[Reveal], code: str, exempt: set[bytes]) -> Verdict:
    """An error group won: failed with ``runner_error:<code>``; the other revealed runners lost the vote."""
    chosen = {r.runner for r in group}
    outliers = tuple(r.runner for r in reveals if r.runner not in chosen and r.runner not in exempt)
    return Verdict(ok=False, result=None, matching=(), outliers=outliers, reason=RUNNER_ERROR_PREFIX + code,
                   error=group[0].result)


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
    errors: list[tuple[Reveal, ErrorResult]] = []
    for r in reveals:
        try:
            err = decode_error_result(r.result)
        except DecodeError:
            rejected.append((r, Rejected(ERROR_RESULT_INVALID, penalize=True)))
            continue
        if err is not None:  # an error result: one vote for "failed with err.code", never admitted as a result
            errors.append((r, err))
            continue
        outcome = admit(plan, r.result)
        if isinstance(outcome, Rejected):
            rejected.append((r, outcome))
        else:
            admitted.append((r, outcome))
    penalized = tuple(r.runner for r, rej in rejected if rej.penalize)
    exempt = {r.runner for r, rej in rejected if not rej.penalize}
    threshold = max(params.threshold, 1)

    if mode == MODE_DETERMINISTIC:
        return _deterministic(reveals, errors, rejected, threshold, penalized, exempt)
    if mode in SINGLE_RUNNER_MODES:
        erring = {r.runner: e for r, e in errors}
        accepted = {r.runner for r, _c in admitted}
        for r in reveals:  # the first admitted or error reveal in committee order decides
            if r.runner in erring:
                return _error_verdict(reveals, [r], erring[r.runner].code, exempt)
            if r.runner in accepted:
                return _win(reveals, [r], exempt)
        return _fail(rejected[0][1].code, penalized)
    if not admitted and not errors:
        return _fail(rejected[0][1].code, penalized)
    if mode == MODE_MAJORITY_VOTE:
        return _majority(reveals, admitted, errors, threshold, penalized, exempt)
    return _structured(plan, reveals, admitted, errors, threshold, penalized, exempt)


def _error_groups(errors: list[tuple[Reveal, ErrorResult]]) -> list[tuple[str, list[Reveal]]]:
    """Error reveals grouped by code, groups in order of first appearance (committee order)."""
    groups: list[tuple[str, list[Reveal]]] = []
    for r, e in errors:
        for code, members in groups:
            if code == e.code:
                members.append(r)
                break
        else:
            groups.append((e.code, [r]))
    return groups


def _deterministic(reveals: tuple[Reveal, ...], errors: list[tuple[Reveal, ErrorResult]],
                   rejected: list[tuple[Reveal, Rejected]], threshold: int, penalized: tuple[bytes, ...],
                   exempt: set[bytes]) -> Verdict:
    erring = {r.runner for r, _e in errors}
    if errors:
        groups = _error_groups(errors)
        sizes = [len(m) for _c, m in groups]
        code, group = groups[sizes.index(max(sizes))]
        if 2 * len(group) > len(reveals):  # a strict majority of the reveals reports the same error
            if len(group) < threshold:
                return _fail(BELOW_THRESHOLD, penalized)
            return _error_verdict(reveals, group, code, exempt)
    rest = tuple(r for r in reveals if r.runner not in erring)
    if not rest:  # only errors, and no code has a majority
        return _fail(RESULTS_DIFFER, penalized)
    if any(r.result != rest[0].result for r in rest):
        return _fail(RESULTS_DIFFER, penalized)
    if rejected:  # identical bytes: all were rejected, for the same reason
        return _fail(rejected[0][1].code, penalized)
    if len(rest) < threshold:
        return _fail(BELOW_THRESHOLD)
    return _win(reveals, list(rest), exempt)  # the error runners (a minority) are outliers


def _votes(admitted: list[tuple[Reveal, Candidate]], errors: list[tuple[Reveal, ErrorResult]],
           reveals: tuple[Reveal, ...]) -> list[tuple[Reveal, Candidate | ErrorResult]]:
    """Admitted results and error results together, in committee order."""
    by_runner: dict[bytes, Candidate | ErrorResult] = {r.runner: c for r, c in admitted}
    by_runner.update({r.runner: e for r, e in errors})
    return [(r, by_runner[r.runner]) for r in reveals if r.runner in by_runner]


def _majority(reveals: tuple[Reveal, ...], admitted: list[tuple[Reveal, Candidate]],
              errors: list[tuple[Reveal, ErrorResult]], threshold: int, penalized: tuple[bytes, ...],
              exempt: set[bytes]) -> Verdict:
    # Groups are kept in a list in order of first appearance (committee order), never iterated from a dict.
    # An error result is one vote for "failed with its code": it groups with errors of the same code only.
    groups: list[tuple[tuple[object, ...], list[Reveal], ErrorResult | None]] = []
    for r, vote in _votes(admitted, errors, reveals):
        key: tuple[object, ...] = ("error", vote.code) if isinstance(vote, ErrorResult) else ("result", vote.key)
        for k, members, _e in groups:
            if k == key:
                members.append(r)
                break
        else:
            groups.append((key, [r], vote if isinstance(vote, ErrorResult) else None))
    sizes = [len(members) for _k, members, _e in groups]
    best = max(sizes)
    if best < threshold:
        return _fail(BELOW_THRESHOLD, penalized)
    if sizes.count(best) > 1:
        return _fail(NO_MAJORITY, penalized)
    _key, winners, err = groups[sizes.index(best)]
    if err is not None:
        return _error_verdict(reveals, winners, err.code, exempt)
    return _win(reveals, winners, exempt)


def _structured(plan: Plan, reveals: tuple[Reveal, ...], admitted: list[tuple[Reveal, Candidate]],
                errors: list[tuple[Reveal, ErrorResult]], threshold: int, penalized: tuple[bytes, ...],
                exempt: set[bytes]) -> Verdict:
    # Greedy clustering in committee order: each result joins the first cluster whose representative
    # (first member) it agrees with. Agreement with a tolerance is not transitive, so order matters; the
    # only order used is the committee order. An error result clusters with errors of the same code only.
    clusters: list[tuple[Candidate | ErrorResult, list[Reveal]]] = []
    for r, vote in _votes(admitted, errors, reveals):
        for rep, members in clusters:
            if isinstance(rep, ErrorResult) or isinstance(vote, ErrorResult):
                same = isinstance(rep, ErrorResult) and isinstance(vote, ErrorResult) and rep.code == vote.code
            else:
                same = agrees(plan, rep, vote)
            if same:
                members.append(r)
                break
        else:
            clusters.append((vote, [r]))
    sizes = [len(members) for _rep, members in clusters]
    best = max(sizes)
    if best < threshold:
        return _fail(BELOW_THRESHOLD, penalized)
    first, winners = clusters[sizes.index(best)]  # index(): earliest cluster wins ties
    if isinstance(first, ErrorResult):
        return _error_verdict(reveals, winners, first.code, exempt)
    return _win(reveals, winners, exempt)
