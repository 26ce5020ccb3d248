"""Verifier checks (CIP-11 §12.6 ``VerifierCheckV1``): submission-time validation, result admission, agreement.

A job's checks play two roles (docs/verification.md §4):

* **admission** — ``json_schema_valid`` and ``numeric_range`` are tested on each result alone; a result
  that fails is excluded from every group or cluster and becomes an outlier;
* **agreement** — ``majority_vote`` (with a field), ``structured_match`` and ``numeric_tolerance`` say
  when two results count as the same answer.

``custom``, ``dns_txt_record_match`` and ``dns_cname_match`` need an actor call or DNS resolution that
this node does not perform inside consensus, so they are refused at submission.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from cowboy_protocol.jobs.json_schema import BudgetExceeded, Meter, load_schema, schema_accepts
from cowboy_protocol.jobs.json_strict import (
    JsonKey,
    JsonValue,
    is_number,
    json_key,
    lookup,
    parse_json,
    split_path,
)
from cowboy_protocol.types.validation_errors import ValidationError

CHECK_MAJORITY_VOTE = 0
CHECK_JSON_SCHEMA_VALID = 1
CHECK_STRUCTURED_MATCH = 2
CHECK_NUMERIC_TOLERANCE = 3
CHECK_NUMERIC_RANGE = 4
CHECK_CUSTOM = 5
CHECK_DNS_TXT_RECORD_MATCH = 6
CHECK_DNS_CNAME_MATCH = 7
CHECK_KINDS: dict[str, int] = {
    "majority_vote": CHECK_MAJORITY_VOTE, "json_schema_valid": CHECK_JSON_SCHEMA_VALID,
    "structured_match": CHECK_STRUCTURED_MATCH, "numeric_tolerance": CHECK_NUMERIC_TOLERANCE,
    "numeric_range": CHECK_NUMERIC_RANGE, "custom": CHECK_CUSTOM,
    "dns_txt_record_match": CHECK_DNS_TXT_RECORD_MATCH, "dns_cname_match": CHECK_DNS_CNAME_MATCH,
}
"""CIP-11 §12.6 VerifierCheckV1 kind bytes (append only)."""
SUPPORTED_CHECK_KINDS = frozenset(range(CHECK_NUMERIC_RANGE + 1))
"""Kinds this node evaluates; the others are refused at submission."""

MAX_CHECKS = 16
"""Most checks on one job."""
MAX_FIELD_BYTES = 256
"""Longest field path, in UTF-8 bytes."""
MAX_MATCH_FIELDS = 64
"""Most fields in one structured_match check."""

CODE = "job_check_invalid"
"""ValidationError code for a check this node refuses."""

# Stable reasons a result is not admitted (also verdict reasons when no result is admitted).
NOT_JSON = "not_json"
NOT_JSON_OBJECT = "not_json_object"
SCHEMA_INVALID = "schema_invalid"
OUT_OF_RANGE = "out_of_range"
FIELD_MISSING = "field_missing"
NOT_NUMERIC = "not_numeric"
CHECK_BUDGET_EXCEEDED = "check_budget_exceeded"


@dataclass(frozen=True, slots=True)
class Check:
    """One verifier check; only the fields of its ``kind`` are meaningful (the others keep their defaults)."""

    kind: int
    """Check kind byte (:data:`CHECK_KINDS`)."""
    field: str = ""
    """majority_vote / numeric_tolerance / numeric_range: field path (``a.b.0``; ``""`` = the whole result;
    for majority_vote ``""`` means "no field": group by exact bytes)."""
    schema: str = ""
    """json_schema_valid: the schema text exactly as stored."""
    fields: tuple[str, ...] = ()
    """structured_match: field paths that must be equal."""
    tolerance: float = 0.0
    """numeric_tolerance: largest accepted |a − b| (inclusive)."""
    minimum: float = 0.0
    """numeric_range: smallest accepted value (inclusive)."""
    maximum: float = 0.0
    """numeric_range: largest accepted value (inclusive)."""


def _refuse(message: str) -> ValidationError:
    return ValidationError(CODE, message, field="checks")


def _path(field: str) -> tuple[str, ...]:
    if not isinstance(field, str) or len(field.encode("utf-8", "surrogatepass")) > MAX_FIELD_BYTES:
        raise _refuse(f"field path must be text of at most {MAX_FIELD_BYTES} bytes")
    return split_path(field)


def _finite(value: object, name: str) -> Fraction:
    if not is_number(value) or not math.isfinite(value):
        raise _refuse(f"{name} must be a finite number")
    return Fraction(value)


@dataclass(frozen=True, slots=True)
class Plan:
    """The checks of one job compiled for one verification mode (see :func:`build_plan`)."""

    need_json: bool
    """Results must parse as strict JSON."""
    need_object: bool
    """Results must be JSON objects (structured_match mode)."""
    schemas: tuple[JsonValue, ...]
    """Parsed json_schema_valid schemas, in check order."""
    ranges: tuple[tuple[tuple[str, ...], Fraction, Fraction], ...]
    """numeric_range (path, min, max), in check order."""
    exact: tuple[tuple[str, ...], ...]
    """Paths whose values must be equal for two results to agree, in check order."""
    tolerances: tuple[tuple[tuple[str, ...], Fraction], ...]
    """numeric_tolerance (path, tolerance), in check order."""
    by_bytes: bool
    """Agreement is byte equality of the whole result (majority_vote without a field)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted result, with what agreement compares precomputed."""

    key: tuple[JsonKey | bytes, ...]
    """Exact-agreement key: values at :attr:`Plan.exact` (or the whole document / bytes)."""
    numbers: tuple[Fraction, ...]
    """Exact values at the numeric_tolerance fields."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A result that failed admission."""

    code: str
    """Stable reason (``schema_invalid``, ``not_json``, …)."""
    penalize: bool
    """False only for :data:`CHECK_BUDGET_EXCEEDED`: the job's checks, not the runner, are at fault."""


def validate_check(check: Check) -> None:
    """Refuse (``ValidationError("job_check_invalid")``) a check this node cannot evaluate. Call at submission."""
    kind = check.kind
    if kind not in SUPPORTED_CHECK_KINDS:
        name = next((n for n, b in CHECK_KINDS.items() if b == kind), f"kind {kind}")
        raise _refuse(f"verifier check {name} is not supported by this node")
    if kind == CHECK_JSON_SCHEMA_VALID:
        load_schema(check.schema)
    elif kind == CHECK_STRUCTURED_MATCH:
        if not 1 <= len(check.fields) <= MAX_MATCH_FIELDS:
            raise _refuse(f"structured_match needs 1..{MAX_MATCH_FIELDS} fields")
        for f in check.fields:
            _path(f)
    else:
        _path(check.field)
    if kind == CHECK_NUMERIC_TOLERANCE and _finite(check.tolerance, "tolerance") < 0:
        raise _refuse("tolerance must not be negative")
    if kind == CHECK_NUMERIC_RANGE and _finite(check.minimum, "minimum") > _finite(check.maximum, "maximum"):
        raise _refuse("numeric_range minimum exceeds maximum")


def validate_checks(checks: tuple[Check, ...]) -> None:
    """:func:`validate_check` on each check, and at most :data:`MAX_CHECKS` of them."""
    if len(checks) > MAX_CHECKS:
        raise _refuse(f"at most {MAX_CHECKS} verifier checks")
    for check in checks:
        validate_check(check)


def build_plan(checks: tuple[Check, ...], *, agreement: bool, structured: bool) -> Plan:
    """Compile ``checks``. ``agreement``: the mode groups results (majority_vote, structured_match);
    ``structured``: structured_match mode (objects required; structured_match/numeric_tolerance count).

    Raises ``ValidationError("job_check_invalid")`` like :func:`validate_checks`.
    """
    validate_checks(checks)
    schemas = tuple(load_schema(c.schema) for c in checks if c.kind == CHECK_JSON_SCHEMA_VALID)
    ranges = tuple((_path(c.field), Fraction(c.minimum), Fraction(c.maximum))
                   for c in checks if c.kind == CHECK_NUMERIC_RANGE)
    exact: list[tuple[str, ...]] = []
    tolerances: list[tuple[tuple[str, ...], Fraction]] = []
    for c in checks:
        if not agreement:
            break
        if c.kind == CHECK_MAJORITY_VOTE and c.field != "":
            exact.append(_path(c.field))
        elif structured and c.kind == CHECK_STRUCTURED_MATCH:
            exact.extend(_path(f) for f in c.fields)
        elif structured and c.kind == CHECK_NUMERIC_TOLERANCE:
            tolerances.append((_path(c.field), Fraction(c.tolerance)))
    if structured and not exact and not tolerances:
        exact.append(())  # no agreement check: whole documents must be equal JSON values
    by_bytes = agreement and not exact and not tolerances
    return Plan(need_json=bool(schemas or ranges or exact or tolerances), need_object=structured,
                schemas=schemas, ranges=ranges, exact=tuple(exact), tolerances=tuple(tolerances),
                by_bytes=by_bytes)


def admit(plan: Plan, result: bytes) -> Candidate | Rejected:
    """Apply the admission checks to one result, in this order: strict JSON, object (structured mode),
    json_schema_valid checks, numeric_range checks, then presence of every agreement field."""
    if not plan.need_json:
        return Candidate(key=(result,) if plan.by_bytes else (), numbers=())
    try:
        value = parse_json(result)
    except ValidationError:
        return Rejected(NOT_JSON, True)
    if plan.need_object and not isinstance(value, dict):
        return Rejected(NOT_JSON_OBJECT, True)
    meter = Meter()
    for schema in plan.schemas:
        try:
            if not schema_accepts(schema, value, meter):
                return Rejected(SCHEMA_INVALID, True)
        except BudgetExceeded:
            return Rejected(CHECK_BUDGET_EXCEEDED, False)
    for path, low, high in plan.ranges:
        found, v = lookup(value, path)
        if not found:
            return Rejected(FIELD_MISSING, True)
        if not is_number(v):
            return Rejected(NOT_NUMERIC, True)
        if not low <= Fraction(v) <= high:
            return Rejected(OUT_OF_RANGE, True)
    key: list[JsonKey | bytes] = []
    for path in plan.exact:
        found, v = lookup(value, path)
        if not found:
            return Rejected(FIELD_MISSING, True)
        key.append(json_key(v))
    numbers: list[Fraction] = []
    for path, _tol in plan.tolerances:
        found, v = lookup(value, path)
        if not found:
            return Rejected(FIELD_MISSING, True)
        if not is_number(v):
            return Rejected(NOT_NUMERIC, True)
        numbers.append(Fraction(v))
    if plan.by_bytes:
        key.append(result)
    return Candidate(key=tuple(key), numbers=tuple(numbers))


def agrees(plan: Plan, representative: Candidate, other: Candidate) -> bool:
    """True iff ``other`` agrees with a cluster's ``representative``: equal exact key, and every
    numeric_tolerance value within its tolerance (|a − b| ≤ tolerance, exact rational arithmetic)."""
    if representative.key != other.key:
        return False
    return all(abs(a - b) <= tol for a, b, (_p, tol)
               in zip(representative.numbers, other.numbers, plan.tolerances, strict=True))
