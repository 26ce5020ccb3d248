"""Verification part of a job spec (CIP-11 §12.6): VerifierCheckV1 kinds and VerificationConfigV1.

Canonical maps (integer keys, CIP-11 deterministic CBOR profile):

* ``VerificationConfigV1 = {0: mode, 1: runners, 2: threshold, 3: [VerifierCheckV1…], 4: tee_required,
  5: dispute_window_blocks, 6: required_tee_type (null|text)}``
* ``VerifierCheckV1 = {0: check kind, 1..: kind-specific fields}`` — see :data:`CHECK_KINDS`.

Check payload texts (``schema``, ``actor_hex``) are carried exactly as stored: never parsed, hex-decoded
or normalised before encoding (§12.6). Decoding is strict about shape and types only; protocol rules
(runner counts, thresholds, which checks a mode allows) live in :func:`validate_verification`.

Also here, because :mod:`cowboy_protocol.types.jobspec` builds on them: the strict field readers shared by the
job-spec schema, the canonical JSON-value conversion (:func:`json_value_to_cbor`) and the strict HTTP URL
parser (:func:`parse_http_url`; ``types/`` may not import ``urllib``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, TypeAlias

from cowboy_protocol.types.fields import expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

__all__ = [
    "ALLOWED_CHECKS",
    "CHECK_KINDS",
    "COMPARISON_CHECKS",
    "MAX_CHECKS",
    "MAX_RUNNERS",
    "UNSUPPORTED_CHECKS",
    "CustomCheck",
    "DnsCnameMatchCheck",
    "DnsTxtRecordMatchCheck",
    "JsonSchemaValidCheck",
    "JsonValue",
    "MajorityVoteCheck",
    "NumericRangeCheck",
    "NumericToleranceCheck",
    "StructuredMatchCheck",
    "VerificationConfig",
    "VerificationMode",
    "VerifierCheck",
    "check_from_cbor",
    "expect_float",
    "expect_json_cbor",
    "expect_opt_text",
    "expect_str",
    "json_value_to_cbor",
    "parse_http_url",
    "validate_verification",
]

MAX_RUNNERS = 16
"""Largest committee a job may ask for (``verification.runners``)."""
MAX_CHECKS = 16
"""Most verifier checks in one job (project choice)."""
MAX_CHECK_TEXT_BYTES = 256
"""Longest field path / method / fqdn / expected value in a check (project choice)."""
MAX_SCHEMA_BYTES = 64 * 1024
"""Longest JSON-schema text of a ``json_schema_valid`` check (the verifier's limit, docs/verification.md §3)."""
MAX_MATCH_FIELDS = 64
"""Most fields of one ``structured_match`` check."""
MAX_TEE_TYPE_BYTES = 32
"""Longest ``required_tee_type`` (a TEE name such as ``sgx``, ``sev-snp``, ``tdx``)."""
MAX_DISPUTE_WINDOW_BLOCKS = 100_000
"""Longest dispute window (project choice: the same bound as ``timeout_blocks``)."""


class VerificationMode(IntEnum):
    """VerificationConfigV1 ``mode`` byte (CIP-11 §12.6; append only)."""

    NONE = 0
    ECONOMIC_BOND = 1
    MAJORITY_VOTE = 2
    STRUCTURED_MATCH = 3
    DETERMINISTIC = 4
    SEMANTIC_SIMILARITY = 5


def _err(field: str, message: str) -> DecodeError:
    return DecodeError(f"{field}: {message}", field=field)


def expect_str(value: object, name: str) -> str:
    """A text string of any length (sizes are bounded by validation, not by the schema)."""
    if not isinstance(value, str):
        raise _err(name, "expected a text string")
    return value


def expect_opt_text(value: object, name: str) -> str | None:
    """CBOR null or a text string."""
    return None if value is None else expect_str(value, name)


def expect_float(value: object, name: str) -> float:
    """A float64. An integer is a decode error: the schema fixes the float64 encoding (§12.6)."""
    if type(value) is not float or not math.isfinite(value):
        raise _err(name, "expected a finite float64")
    return value


def _as_float(value: object, name: str) -> float:
    """Constructor coercion: ints become floats so ``tolerance=1`` still encodes as ``fb 3ff0…``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError("job_checks_invalid", f"{name}: expected a number", field=name)
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class MajorityVoteCheck:
    """Kind 0: the runners' values at ``field`` must agree by majority."""

    KIND: ClassVar[int] = 0
    field: str
    """Path of the compared field in the result (stored text, not parsed)."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 0, 1: field}``."""
        return {0: self.KIND, 1: self.field}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> MajorityVoteCheck:
        """Decode the map (key set already checked)."""
        return cls(field=expect_str(m[1], "check.field"))


@dataclass(frozen=True, slots=True, kw_only=True)
class JsonSchemaValidCheck:
    """Kind 1: the result must validate against a JSON schema."""

    KIND: ClassVar[int] = 1
    schema: str
    """The JSON-schema text exactly as stored (never parsed before hashing)."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 1, 1: schema}``."""
        return {0: self.KIND, 1: self.schema}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> JsonSchemaValidCheck:
        """Decode the map (key set already checked)."""
        return cls(schema=expect_str(m[1], "check.schema"))


@dataclass(frozen=True, slots=True, kw_only=True)
class StructuredMatchCheck:
    """Kind 2: the listed fields must be equal across runners."""

    KIND: ClassVar[int] = 2
    fields: tuple[str, ...]
    """Field paths compared, in the order given."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 2, 1: [field, …]}``."""
        return {0: self.KIND, 1: list(self.fields)}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> StructuredMatchCheck:
        """Decode the map (key set already checked)."""
        if not isinstance(m[1], list):
            raise _err("check.fields", "expected an array of text strings")
        return cls(fields=tuple(expect_str(f, "check.fields") for f in m[1]))


@dataclass(frozen=True, slots=True, kw_only=True)
class NumericToleranceCheck:
    """Kind 3: the numeric values at ``field`` must lie within ``tolerance`` of each other."""

    KIND: ClassVar[int] = 3
    field: str
    """Path of the compared number."""
    tolerance: float
    """Allowed absolute difference (always encoded as float64)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tolerance", _as_float(self.tolerance, "check.tolerance"))

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 3, 1: field, 2: tolerance_float64}``."""
        return {0: self.KIND, 1: self.field, 2: self.tolerance}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> NumericToleranceCheck:
        """Decode the map (key set already checked)."""
        return cls(field=expect_str(m[1], "check.field"), tolerance=expect_float(m[2], "check.tolerance"))


@dataclass(frozen=True, slots=True, kw_only=True)
class NumericRangeCheck:
    """Kind 4: the number at ``field`` must lie in ``[min, max]``."""

    KIND: ClassVar[int] = 4
    field: str
    """Path of the checked number."""
    min: float
    """Lower bound (float64)."""
    max: float
    """Upper bound (float64)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "min", _as_float(self.min, "check.min"))
        object.__setattr__(self, "max", _as_float(self.max, "check.max"))

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 4, 1: field, 2: min_float64, 3: max_float64}``."""
        return {0: self.KIND, 1: self.field, 2: self.min, 3: self.max}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> NumericRangeCheck:
        """Decode the map (key set already checked)."""
        return cls(field=expect_str(m[1], "check.field"), min=expect_float(m[2], "check.min"),
                   max=expect_float(m[3], "check.max"))


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomCheck:
    """Kind 5: an actor method decides (encodable, refused at submission by this node)."""

    KIND: ClassVar[int] = 5
    actor_hex: str
    """The actor address text exactly as stored (never hex-decoded before hashing)."""
    method: str
    """The actor method to call."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 5, 1: actor_hex, 2: method}``."""
        return {0: self.KIND, 1: self.actor_hex, 2: self.method}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> CustomCheck:
        """Decode the map (key set already checked)."""
        return cls(actor_hex=expect_str(m[1], "check.actor_hex"), method=expect_str(m[2], "check.method"))


@dataclass(frozen=True, slots=True, kw_only=True)
class DnsTxtRecordMatchCheck:
    """Kind 6: a DNS TXT record must match (encodable, refused at submission by this node)."""

    KIND: ClassVar[int] = 6
    fqdn: str
    """Name queried."""
    expected_value: str
    """Expected TXT value."""
    min_resolvers: int
    """Independent resolvers that must agree."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 6, 1: fqdn, 2: expected_value, 3: min_resolvers}``."""
        return {0: self.KIND, 1: self.fqdn, 2: self.expected_value, 3: self.min_resolvers}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> DnsTxtRecordMatchCheck:
        """Decode the map (key set already checked)."""
        return cls(fqdn=expect_str(m[1], "check.fqdn"), expected_value=expect_str(m[2], "check.expected_value"),
                   min_resolvers=expect_uint(m[3], "check.min_resolvers"))


@dataclass(frozen=True, slots=True, kw_only=True)
class DnsCnameMatchCheck:
    """Kind 7: a DNS CNAME must point at the expected target (encodable, refused at submission)."""

    KIND: ClassVar[int] = 7
    fqdn: str
    """Name queried."""
    expected_target: str
    """Expected CNAME target."""
    min_resolvers: int
    """Independent resolvers that must agree."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 7, 1: fqdn, 2: expected_target, 3: min_resolvers}``."""
        return {0: self.KIND, 1: self.fqdn, 2: self.expected_target, 3: self.min_resolvers}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> DnsCnameMatchCheck:
        """Decode the map (key set already checked)."""
        return cls(fqdn=expect_str(m[1], "check.fqdn"), expected_target=expect_str(m[2], "check.expected_target"),
                   min_resolvers=expect_uint(m[3], "check.min_resolvers"))


VerifierCheck: TypeAlias = (
    MajorityVoteCheck | JsonSchemaValidCheck | StructuredMatchCheck | NumericToleranceCheck | NumericRangeCheck
    | CustomCheck | DnsTxtRecordMatchCheck | DnsCnameMatchCheck
)
"""One VerifierCheckV1."""

_CHECK_CLASSES: tuple[type[VerifierCheck], ...] = (
    MajorityVoteCheck, JsonSchemaValidCheck, StructuredMatchCheck, NumericToleranceCheck, NumericRangeCheck,
    CustomCheck, DnsTxtRecordMatchCheck, DnsCnameMatchCheck,
)
_CHECK_KEYS: dict[int, int] = {0: 2, 1: 2, 2: 2, 3: 3, 4: 4, 5: 3, 6: 4, 7: 4}
"""Number of keys of each check kind's map (key 0 included)."""

CHECK_KINDS: dict[str, int] = {
    "majority_vote": 0, "json_schema_valid": 1, "structured_match": 2, "numeric_tolerance": 3,
    "numeric_range": 4, "custom": 5, "dns_txt_record_match": 6, "dns_cname_match": 7,
}
"""VerifierCheckV1 kind bytes (CIP-11 §12.6; append only)."""
CHECK_KIND_NAMES: dict[int, str] = {v: k for k, v in CHECK_KINDS.items()}
"""Inverse of :data:`CHECK_KINDS`."""

UNSUPPORTED_CHECKS: frozenset[int] = frozenset({5, 6, 7})
"""Check kinds this node cannot evaluate (custom actor checks, DNS checks): refused at submission."""
COMPARISON_CHECKS: frozenset[int] = frozenset({0, 2, 3})
"""Checks that compare several runners' results (majority_vote, structured_match, numeric_tolerance)."""
_VALIDITY_CHECKS: frozenset[int] = frozenset({1, 4})
ALLOWED_CHECKS: dict[VerificationMode, frozenset[int]] = {
    VerificationMode.NONE: _VALIDITY_CHECKS,
    VerificationMode.ECONOMIC_BOND: _VALIDITY_CHECKS,
    VerificationMode.MAJORITY_VOTE: _VALIDITY_CHECKS | {0},
    VerificationMode.STRUCTURED_MATCH: _VALIDITY_CHECKS | COMPARISON_CHECKS,
    VerificationMode.DETERMINISTIC: _VALIDITY_CHECKS,
    VerificationMode.SEMANTIC_SIMILARITY: frozenset(),
}
"""Check kinds accepted per mode (project choice): the admission checks json_schema_valid and numeric_range
apply to every result in every mode (docs/verification.md §4); a comparison check is accepted only in a mode
whose agreement rule uses it, rather than being silently ignored."""


def check_from_cbor(value: object) -> VerifierCheck:
    """Strictly decode one VerifierCheckV1 map (any of the 8 kinds)."""
    if not isinstance(value, dict) or 0 not in value:
        raise _err("check", "expected a map with a kind under key 0")
    kind = expect_uint(value[0], "check.kind", 0xFF)
    if kind not in _CHECK_KEYS:
        raise _err("check.kind", f"unknown check kind {kind}")
    m = expect_map(value, frozenset(range(_CHECK_KEYS[kind])), f"check({CHECK_KIND_NAMES[kind]})")
    return _CHECK_CLASSES[kind].from_cbor(m)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerificationConfig:
    """VerificationConfigV1: how the results of a job are verified."""

    DEFAULT: ClassVar[VerificationConfig]
    """Mode none, one runner, threshold 1, no checks, no TEE, no dispute window."""

    mode: VerificationMode = VerificationMode.NONE
    """Verification mode byte."""
    runners: int = 1
    """Committee size M (runners that execute the job)."""
    threshold: int = 1
    """Agreeing results needed."""
    checks: tuple[VerifierCheck, ...] = ()
    """Verifier checks, in the order given."""
    tee_required: bool = False
    """Runners must offer a TEE."""
    dispute_window_blocks: int = 0
    """Blocks after settlement during which the result may be disputed."""
    required_tee_type: str | None = None
    """A specific TEE type (null: any, when ``tee_required``)."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map ``{0: mode, …, 6: required_tee_type}``."""
        return {0: int(self.mode), 1: self.runners, 2: self.threshold, 3: [c.to_cbor() for c in self.checks],
                4: self.tee_required, 5: self.dispute_window_blocks, 6: self.required_tee_type}

    @classmethod
    def from_cbor(cls, value: object) -> VerificationConfig:
        """Strict decode (exact key set, known mode byte, bool/uint/null types)."""
        m = expect_map(value, frozenset(range(7)), "verification")
        mode = expect_uint(m[0], "verification.mode", 0xFF)
        if mode > max(VerificationMode):
            raise _err("verification.mode", f"unknown mode {mode}")
        if not isinstance(m[3], list):
            raise _err("verification.checks", "expected an array")
        if not isinstance(m[4], bool):
            raise _err("verification.tee_required", "expected a bool")
        return cls(mode=VerificationMode(mode), runners=expect_uint(m[1], "verification.runners"),
                   threshold=expect_uint(m[2], "verification.threshold"),
                   checks=tuple(check_from_cbor(c) for c in m[3]), tee_required=m[4],
                   dispute_window_blocks=expect_uint(m[5], "verification.dispute_window_blocks"),
                   required_tee_type=expect_opt_text(m[6], "verification.required_tee_type"))


VerificationConfig.DEFAULT = VerificationConfig()


def _fail(code: str, message: str) -> ValidationError:
    return ValidationError(code, message, field="verification")


def _field_path(value: str, name: str) -> None:
    """A field path (docs/verification.md §2): ``""`` is the whole result, else ``.``-separated non-empty
    segments; at most 256 UTF-8 bytes."""
    if len(value.encode("utf-8", "surrogatepass")) > MAX_CHECK_TEXT_BYTES or (value and "" in value.split(".")):
        raise _fail("job_checks_invalid", f"{name}: a field path of at most {MAX_CHECK_TEXT_BYTES} bytes "
                                          "without empty segments")


def _validate_check(i: int, c: VerifierCheck) -> None:
    where = f"verification.checks[{i}]"
    if isinstance(c, (MajorityVoteCheck, NumericToleranceCheck, NumericRangeCheck)):
        _field_path(c.field, f"{where}.field")
    if isinstance(c, JsonSchemaValidCheck):
        if not c.schema or len(c.schema.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
            raise _fail("job_checks_invalid", f"{where}.schema must be 1..{MAX_SCHEMA_BYTES} UTF-8 bytes")
    elif isinstance(c, StructuredMatchCheck):
        if not 1 <= len(c.fields) <= MAX_MATCH_FIELDS or len(set(c.fields)) != len(c.fields):
            raise _fail("job_checks_invalid", f"{where}.fields must be 1..{MAX_MATCH_FIELDS} distinct paths")
        for f in c.fields:
            _field_path(f, f"{where}.fields[]")
    elif isinstance(c, NumericToleranceCheck):
        if not math.isfinite(c.tolerance) or c.tolerance < 0:
            raise _fail("job_checks_invalid", f"{where}.tolerance must be a finite number ≥ 0")
    elif isinstance(c, NumericRangeCheck) and not (math.isfinite(c.min) and math.isfinite(c.max) and c.min <= c.max):
        raise _fail("job_checks_invalid", f"{where}: min and max must be finite with min ≤ max")


def validate_verification(v: VerificationConfig) -> None:
    """Check the verification rules of a submitted job; raise :class:`ValidationError` with a stable code.

    Codes, in the order checked: ``semantic_similarity_unsupported``, ``job_runners_invalid``,
    ``job_mode_runners_mismatch``, ``job_threshold_invalid``, ``job_check_unsupported``, ``job_checks_invalid``,
    ``job_verification_invalid`` (TEE fields, dispute window).
    """
    if v.mode == VerificationMode.SEMANTIC_SIMILARITY:
        raise _fail("semantic_similarity_unsupported",
                    "verification mode semantic_similarity is not accepted: this node ships no embedding model "
                    "to compare results with")
    if not 1 <= v.runners <= MAX_RUNNERS:
        raise _fail("job_runners_invalid", f"verification.runners must be in 1..{MAX_RUNNERS}, got {v.runners}")
    single = v.mode in (VerificationMode.NONE, VerificationMode.ECONOMIC_BOND)
    if single and v.runners != 1:
        raise _fail("job_mode_runners_mismatch", f"mode {v.mode.name.lower()} needs exactly 1 runner")
    if not single and v.runners < 2:
        raise _fail("job_mode_runners_mismatch", f"mode {v.mode.name.lower()} needs at least 2 runners")
    if not 1 <= v.threshold <= v.runners:
        raise _fail("job_threshold_invalid", f"verification.threshold must be in 1..{v.runners}")
    if v.mode == VerificationMode.MAJORITY_VOTE and 2 * v.threshold <= v.runners:
        raise _fail("job_threshold_invalid", f"majority_vote threshold must exceed runners/2 ({v.runners}/2)")
    if len(v.checks) > MAX_CHECKS:
        raise _fail("job_checks_invalid", f"at most {MAX_CHECKS} verifier checks")
    allowed = ALLOWED_CHECKS[v.mode]
    for i, c in enumerate(v.checks):
        if c.KIND in UNSUPPORTED_CHECKS:
            raise _fail("job_check_unsupported", f"verification.checks[{i}]: check kind "
                                                 f"{CHECK_KIND_NAMES[c.KIND]} is not supported by this node")
        if c.KIND not in allowed:
            raise _fail("job_checks_invalid", f"verification.checks[{i}]: check kind {CHECK_KIND_NAMES[c.KIND]} "
                                              f"is not allowed in mode {v.mode.name.lower()}")
        _validate_check(i, c)
    if v.mode == VerificationMode.STRUCTURED_MATCH and not any(c.KIND in COMPARISON_CHECKS for c in v.checks):
        raise _fail("job_checks_invalid", "mode structured_match needs at least one majority_vote, structured_match "
                                          "or numeric_tolerance check")
    if v.required_tee_type is not None and (
            not v.tee_required or not 1 <= len(v.required_tee_type.encode("utf-8", "surrogatepass"))
            <= MAX_TEE_TYPE_BYTES):
        raise _fail("job_verification_invalid",
                    f"required_tee_type needs tee_required and 1..{MAX_TEE_TYPE_BYTES} bytes")
    if not 0 <= v.dispute_window_blocks <= MAX_DISPUTE_WINDOW_BLOCKS:
        raise _fail("job_verification_invalid", f"dispute_window_blocks must be ≤ {MAX_DISPUTE_WINDOW_BLOCKS}")



JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
"""A JSON value in canonical CBOR form (see :func:`json_value_to_cbor`)."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of a JSON value (MCP arguments)."""
MAX_URL_BYTES = 4096
"""Longest HTTP job URL (project choice)."""
_INT_MIN = -(1 << 64)
_INT_MAX = (1 << 64) - 1
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_IPV6_CHARS = frozenset("0123456789abcdef:.")


# --------------------------------------------------------------------------- JSON values


def json_value_to_cbor(value: object, *, path: str = "arguments", code: str = "job_type_invalid",
                       _depth: int = 0) -> JsonValue:
    """Convert a JSON value (as ``json.loads`` returns it; tuples count as arrays) to its canonical CBOR form.

    CIP-11 §12.6: objects become maps with text keys (the encoder sorts them), arrays stay arrays, a number
    that is integral and within the codec's integer range ``[-2**64, 2**64-1]`` becomes an integer, any other
    finite number a float64. NaN/±Inf, byte strings, non-text keys and nesting deeper than
    :data:`MAX_JSON_DEPTH` raise :class:`ValidationError` with ``code``, naming ``path``.
    """
    if _depth > MAX_JSON_DEPTH:
        raise ValidationError(code, f"{path}: nested deeper than {MAX_JSON_DEPTH} levels", field=path)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return int(value)
        try:
            return float(value)
        except OverflowError:
            raise ValidationError(code, f"{path}: number too large", field=path) from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(code, f"{path}: NaN and infinities are not JSON numbers", field=path)
        if value.is_integer() and _INT_MIN <= value <= _INT_MAX:
            return int(value)
        return float(value)
    if isinstance(value, (list, tuple)):
        return [json_value_to_cbor(v, path=f"{path}[{i}]", code=code, _depth=_depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(code, f"{path}: object keys must be strings", field=path)
            out[k] = json_value_to_cbor(v, path=f"{path}.{k}", code=code, _depth=_depth + 1)
        return out
    raise ValidationError(code, f"{path}: {type(value).__name__} is not a JSON value", field=path)


def expect_json_cbor(value: object, path: str, depth: int = 0) -> JsonValue:
    """Decode side of :func:`json_value_to_cbor`: accept only a value already in canonical JSON form.

    An integral float within the integer range is rejected: the canonical form of that number is an integer.
    """
    if depth > MAX_JSON_DEPTH:
        raise _err(path, f"nested deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if value.is_integer() and _INT_MIN <= value <= _INT_MAX:
            raise _err(path, "an integral number must be encoded as an integer")
        return value
    if isinstance(value, list):
        return [expect_json_cbor(v, path, depth + 1) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _err(path, "JSON object keys must be text")
        return {k: expect_json_cbor(v, path, depth + 1) for k, v in value.items()}
    raise _err(path, "not a JSON value")


# --------------------------------------------------------------------------- HTTP URL


def parse_http_url(url: str) -> tuple[str, str, int | None] | None:
    """Strictly parse an HTTP job URL into (scheme, lower-cased host, port or None); None if invalid.

    Accepted: ``http://`` or ``https://`` (scheme case-insensitive), a host (DNS name / IPv4 of letters,
    digits, ``-``, ``_`` in dot-separated labels of 1..63, ≤ 253 in all, or a bracketed IPv6 literal), an
    optional port 1..65535, then anything starting with ``/``, ``?`` or ``#``. Printable ASCII only (no
    spaces: percent-encode), at most :data:`MAX_URL_BYTES`, no user-info (``user@host``).
    """
    if not isinstance(url, str) or len(url) > MAX_URL_BYTES or any(not "!" <= ch <= "~" for ch in url):
        return None
    head = url[:8].lower()
    if head.startswith("http://"):
        scheme, rest = "http", url[7:]
    elif head.startswith("https://"):
        scheme, rest = "https", url[8:]
    else:
        return None
    end = len(rest)
    for sep in "/?#":
        i = rest.find(sep)
        if 0 <= i < end:
            end = i
    authority = rest[:end].lower()
    if "@" in authority:
        return None
    if authority.startswith("["):
        close = authority.find("]")
        host, port_part = authority[1:close], authority[close + 1:]
        if close < 0 or host.count(":") < 2 or not _IPV6_CHARS.issuperset(host):
            return None
    else:
        host, colon, port_text = authority.partition(":")
        port_part = colon + port_text
        labels = host.split(".")
        if not host or len(host) > 253 or any(not 1 <= len(lb) <= 63 or not _HOST_CHARS.issuperset(lb)
                                              for lb in labels):
            return None
    port: int | None = None
    if port_part:
        digits = port_part[1:]
        if not port_part.startswith(":") or not digits.isascii() or not digits.isdigit() or len(digits) > 5:
            return None
        port = int(digits)
        if not 1 <= port <= 65535:
            return None
    return scheme, host, port
