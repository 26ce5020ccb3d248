"""Job specifications (CIP-11 §12.6 ``JobSpecV1``): job types, bounds, callback, canonical bytes, validation.

``canonical_job_spec(spec)`` is the CIP-11 deterministic CBOR encoding of the ``JobSpecV1`` map (keys 0..11)
and ``job_spec_hash(spec) = keccak256(canonical_job_spec(spec))`` (project choice: the seed lost the
definition). Optional fields are CBOR null when absent — never omitted, and distinct from empty values.
Floats are always float64, JSON values (MCP arguments) are carried in their canonical CBOR form (integral
in-range numbers as integers, other numbers as float64, objects as text-keyed maps).

A transaction or an actor cannot know a job's id, submitter or submission height, so what they submit is a
:class:`JobRequest` (the spec without keys 0, 8 and 9, renumbered 0..8); execution turns it into the stored
:class:`JobSpecV1` with :meth:`JobRequest.to_spec`, the id coming from :func:`derive_job_id`.

:func:`validate_request` applies the submission rules, each failure a :class:`ValidationError` with a stable
snake_case code. Decoding (``from_cbor``) is strict about shape, types and fixed lengths only.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, HASH_LEN, U32_MAX, U64_MAX, expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.jobspec_checks import (
    JsonValue,
    VerificationConfig,
    expect_float,
    expect_json_cbor,
    expect_opt_text,
    expect_str,
    json_value_to_cbor,
    parse_http_url,
    validate_verification,
)
from cowboy_protocol.types.runner import (
    JOB_KIND_AGENT,
    JOB_KIND_CUSTOM,
    JOB_KIND_HTTP,
    JOB_KIND_LLM,
    JOB_KIND_MCP,
    JOB_KIND_PUBLISH_CHAIN_ROOT,
)
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

Attachment: TypeAlias = dict[Any, Any]
"""An opaque canonical CIP-9 VolumeAttachmentV1 map, kept exactly as decoded."""

ZERO_ADDRESS = bytes(ADDRESS_LEN)
"""The all-zero address: a callback to it means "no callback"."""
MAX_REQUEST_BYTES = 64 * 1024
"""Largest canonical :class:`JobRequest` accepted at submission (``job_too_large``)."""
MIN_TIMEOUT_BLOCKS = 10
"""Smallest ``timeout_blocks``: commit phase (0.6·timeout) and reveal phase both need blocks."""
MAX_TIMEOUT_BLOCKS = 100_000
"""Largest ``timeout_blocks``."""
MAX_HTTP_HEADERS = 32
"""Most headers of an HTTP job."""
MAX_HANDLER_BYTES = 256
"""Longest callback handler name (UTF-8 bytes)."""
MAX_CALLBACK_PAYLOAD_BYTES = 64 * 1024
"""Largest callback payload."""
MAX_CORRELATION_ID_BYTES = 256
"""Longest callback correlation id (UTF-8 bytes)."""
MAX_CALLBACK_CONTEXT_BYTES = 4 * 1024
"""Largest callback context."""
MAX_POOL_BYTES = 32
"""Longest ``required_runner_pool`` id (the same bound as ``Capabilities.pools``)."""
HTTP_METHODS: tuple[str, ...] = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
"""Methods an HTTP job may use (exact, upper case)."""
FORBIDDEN_HTTP_HEADERS: frozenset[str] = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Headers the runner owns (compared case-insensitively); a ``Host`` header would also dodge the capability
filter, which matches the URL's host."""
JOB_ID_DOMAIN = b"cowboy-job-id-v1:"
"""Domain tag of :func:`derive_job_id`."""

_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _err(field: str, message: str) -> DecodeError:
    return DecodeError(f"{field}: {message}", field=field)


def _opt_bytes(value: object, name: str) -> bytes | None:
    return None if value is None else expect_bytes(value, name)


def _opt_uint(value: object, name: str) -> int | None:
    return None if value is None else expect_uint(value, name)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------- job types


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmJob:
    """Job kind 0x00: an LLM completion."""

    KIND: ClassVar[int] = JOB_KIND_LLM
    model_id: bytes
    """32-byte model identifier."""
    prompt: str
    """User prompt."""
    system_prompt: str | None = None
    """System prompt (null: none)."""
    temperature: float | None = None
    """Sampling temperature, float64 in 0..2 (null: the runner's default)."""
    max_tokens: int
    """Most tokens generated."""
    response_model: str | None = None
    """Response schema text exactly as stored (null: free text)."""

    def __post_init__(self) -> None:
        if isinstance(self.temperature, int) and not isinstance(self.temperature, bool):
            object.__setattr__(self, "temperature", float(self.temperature))  # float64 even when integral

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 0, 1: model_id, 2: prompt, 3: system_prompt, 4: temperature, 5: max_tokens, 6: response_model}``."""
        return {0: self.KIND, 1: self.model_id, 2: self.prompt, 3: self.system_prompt, 4: self.temperature,
                5: self.max_tokens, 6: self.response_model}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> LlmJob:
        """Decode the map (key set already checked)."""
        return cls(model_id=expect_bytes(m[1], "llm.model_id", HASH_LEN), prompt=expect_str(m[2], "llm.prompt"),
                   system_prompt=expect_opt_text(m[3], "llm.system_prompt"),
                   temperature=None if m[4] is None else expect_float(m[4], "llm.temperature"),
                   max_tokens=expect_uint(m[5], "llm.max_tokens"),
                   response_model=expect_opt_text(m[6], "llm.response_model"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Freshness:
    """HTTP freshness requirement ``{0: max_age_seconds, 1: cache_control, 2: timestamp_field}``."""

    max_age_seconds: int
    """Oldest acceptable response age."""
    cache_control: str | None = None
    """Cache-Control text to send (null: none)."""
    timestamp_field: str | None = None
    """Result field carrying the data's timestamp (null: none)."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {0: self.max_age_seconds, 1: self.cache_control, 2: self.timestamp_field}

    @classmethod
    def from_cbor(cls, value: object) -> Freshness:
        """Strict decode."""
        m = expect_map(value, frozenset(range(3)), "http.freshness")
        return cls(max_age_seconds=expect_uint(m[0], "http.freshness.max_age_seconds"),
                   cache_control=expect_opt_text(m[1], "http.freshness.cache_control"),
                   timestamp_field=expect_opt_text(m[2], "http.freshness.timestamp_field"))


def _header_key(pair: tuple[str, str]) -> bytes:
    try:
        return encode(pair[0])
    except CodecError as e:
        raise ValidationError("job_type_invalid", f"http.headers: bad header name: {e}", field="job_type") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpJob:
    """Job kind 0x01: an HTTP request."""

    KIND: ClassVar[int] = JOB_KIND_HTTP
    url: str
    """``http://`` or ``https://`` URL."""
    method: str = "GET"
    """One of :data:`HTTP_METHODS`."""
    headers: tuple[tuple[str, str], ...] = ()
    """(name, value) pairs; kept in canonical order (sorted by encoded name); names are exact, not lower-cased."""
    body: bytes | None = None
    """Request body (null: none; distinct from an empty body)."""
    extraction: str | None = None
    """Extraction spec text exactly as stored (null: whole response)."""
    freshness: Freshness | None = None
    """Freshness requirement (null: none)."""

    def __post_init__(self) -> None:
        raw: Any = self.headers
        items = list(raw.items() if isinstance(raw, Mapping) else raw)  # a mapping is accepted for convenience
        if not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)
                   for p in items):
            raise ValidationError("job_type_invalid", "http.headers: expected (name, value) text pairs",
                                  field="job_type")
        pairs = tuple(sorted(items, key=_header_key))
        for a, b in itertools.pairwise(pairs):
            if a[0] == b[0]:
                raise ValidationError("job_type_invalid", f"http.headers: duplicate header {a[0]!r}", field="job_type")
        object.__setattr__(self, "headers", pairs)

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 1, 1: url, 2: method, 3: {name: value}, 4: body, 5: extraction, 6: freshness}``."""
        return {0: self.KIND, 1: self.url, 2: self.method, 3: dict(self.headers), 4: self.body, 5: self.extraction,
                6: None if self.freshness is None else self.freshness.to_cbor()}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> HttpJob:
        """Decode the map (key set already checked)."""
        hm = m[3]
        if not isinstance(hm, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in hm.items()):
            raise _err("http.headers", "expected a map of text to text")
        return cls(url=expect_str(m[1], "http.url"), method=expect_str(m[2], "http.method"),
                   headers=tuple(hm.items()), body=_opt_bytes(m[4], "http.body"),
                   extraction=expect_opt_text(m[5], "http.extraction"),
                   freshness=None if m[6] is None else Freshness.from_cbor(m[6]))


@dataclass(frozen=True, slots=True, kw_only=True)
class McpJob:
    """Job kind 0x02: a Model Context Protocol tool call."""

    KIND: ClassVar[int] = JOB_KIND_MCP
    server: str
    """MCP server identifier."""
    tool_name: str
    """Tool to call."""
    arguments: JsonValue
    """Tool arguments: a JSON value, normalised to canonical form on construction."""
    timeout_seconds: int | None = None
    """Call timeout (null: the runner's default)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", json_value_to_cbor(self.arguments, path="mcp.arguments"))

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 2, 1: server, 2: tool_name, 3: arguments, 4: timeout_seconds}``."""
        return {0: self.KIND, 1: self.server, 2: self.tool_name, 3: self.arguments, 4: self.timeout_seconds}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> McpJob:
        """Decode the map (key set already checked); arguments must already be canonical JSON."""
        return cls(server=expect_str(m[1], "mcp.server"), tool_name=expect_str(m[2], "mcp.tool_name"),
                   arguments=expect_json_cbor(m[3], "mcp.arguments"),
                   timeout_seconds=_opt_uint(m[4], "mcp.timeout_seconds"))


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomJob:
    """Job kind 0x03: a custom executor identified by hash."""

    KIND: ClassVar[int] = JOB_KIND_CUSTOM
    executor_hash: bytes
    """32-byte hash of the executor."""
    params: bytes = b""
    """Opaque parameters."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 3, 1: executor_hash, 2: params}``."""
        return {0: self.KIND, 1: self.executor_hash, 2: self.params}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> CustomJob:
        """Decode the map (key set already checked)."""
        return cls(executor_hash=expect_bytes(m[1], "custom.executor_hash", HASH_LEN),
                   params=expect_bytes(m[2], "custom.params"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishChainRootJob:
    """Job kind 0x04: publish a chain root from one chain to a registry on another."""

    KIND: ClassVar[int] = JOB_KIND_PUBLISH_CHAIN_ROOT
    src_chain_id: int
    """Chain whose root is published."""
    dst_chain_id: int
    """Chain receiving it."""
    height: int
    """Height of the published root."""
    registry_address: bytes
    """20-byte registry contract on the destination chain."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 4, 1: src_chain_id, 2: dst_chain_id, 3: height, 4: registry_address}``."""
        return {0: self.KIND, 1: self.src_chain_id, 2: self.dst_chain_id, 3: self.height, 4: self.registry_address}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> PublishChainRootJob:
        """Decode the map (key set already checked)."""
        return cls(src_chain_id=expect_uint(m[1], "publish_chain_root.src_chain_id"),
                   dst_chain_id=expect_uint(m[2], "publish_chain_root.dst_chain_id"),
                   height=expect_uint(m[3], "publish_chain_root.height"),
                   registry_address=expect_bytes(m[4], "publish_chain_root.registry_address", ADDRESS_LEN))


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentJob:
    """Job kind 0x05: an agent run (model plus tools, several iterations)."""

    KIND: ClassVar[int] = JOB_KIND_AGENT
    model: str
    """Model name."""
    query: str
    """The task."""
    system_prompt_path: str | None = None
    """System prompt file on the runner (null: none)."""
    system_prompt_inline: str | None = None
    """Inline system prompt (null: none)."""
    session_id: str | None = None
    """Session to continue (null: new)."""
    session_dir: str | None = None
    """Session directory on the runner (null: default)."""
    max_iterations: int
    """Most agent iterations."""
    max_tool_calls_per_iter: int
    """Most tool calls per iteration."""
    timeout_seconds: int
    """Wall-clock limit of the run."""

    def to_cbor(self) -> dict[int, Any]:
        """``{0: 5, 1: model, 2: query, 3..6: optional texts, 7: max_iterations, 8: …, 9: timeout_seconds}``."""
        return {0: self.KIND, 1: self.model, 2: self.query, 3: self.system_prompt_path, 4: self.system_prompt_inline,
                5: self.session_id, 6: self.session_dir, 7: self.max_iterations, 8: self.max_tool_calls_per_iter,
                9: self.timeout_seconds}

    @classmethod
    def from_cbor(cls, m: Mapping[int, Any]) -> AgentJob:
        """Decode the map (key set already checked)."""
        return cls(model=expect_str(m[1], "agent.model"), query=expect_str(m[2], "agent.query"),
                   system_prompt_path=expect_opt_text(m[3], "agent.system_prompt_path"),
                   system_prompt_inline=expect_opt_text(m[4], "agent.system_prompt_inline"),
                   session_id=expect_opt_text(m[5], "agent.session_id"),
                   session_dir=expect_opt_text(m[6], "agent.session_dir"),
                   max_iterations=expect_uint(m[7], "agent.max_iterations"),
                   max_tool_calls_per_iter=expect_uint(m[8], "agent.max_tool_calls_per_iter"),
                   timeout_seconds=expect_uint(m[9], "agent.timeout_seconds"))


JobType: TypeAlias = LlmJob | HttpJob | McpJob | CustomJob | PublishChainRootJob | AgentJob
"""One JobTypeV1 variant."""
JOB_TYPE_CLASSES: tuple[type[JobType], ...] = (LlmJob, HttpJob, McpJob, CustomJob, PublishChainRootJob, AgentJob)
"""The variants, indexed by job kind byte (``JOB_TYPE_CLASSES[k].KIND == k``)."""
_JOB_TYPE_KEYS: dict[int, int] = {JOB_KIND_LLM: 7, JOB_KIND_HTTP: 7, JOB_KIND_MCP: 5, JOB_KIND_CUSTOM: 3,
                                  JOB_KIND_PUBLISH_CHAIN_ROOT: 5, JOB_KIND_AGENT: 10}


def job_type_from_cbor(value: object) -> JobType:
    """Strictly decode a JobTypeV1 map (kind under key 0, then exactly that kind's keys)."""
    if not isinstance(value, dict) or 0 not in value:
        raise _err("job_type", "expected a map with the job kind under key 0")
    kind = expect_uint(value[0], "job_type.kind", 0xFF)
    if kind not in _JOB_TYPE_KEYS:
        raise _err("job_type.kind", f"unknown job kind {kind}")
    cls = JOB_TYPE_CLASSES[kind]
    return cls.from_cbor(expect_map(value, frozenset(range(_JOB_TYPE_KEYS[kind])), f"job_type({cls.__name__})"))


# --------------------------------------------------------------------------- bounds, callback


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceBounds:
    """ResourceBoundsV1 ``{0: max_input_tokens, …, 4: max_retries}``; the defaults are a project choice."""

    max_input_tokens: int = 8_192
    """Most input tokens (LLM/agent jobs)."""
    max_output_tokens: int = 1_024
    """Most output tokens (LLM/agent jobs)."""
    max_wall_time_seconds: int = 60
    """Wall-clock limit of one execution."""
    max_memory_mb: int = 512
    """Memory limit of one execution."""
    max_retries: int = 3
    """Runner-side retries of a failed execution."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {0: self.max_input_tokens, 1: self.max_output_tokens, 2: self.max_wall_time_seconds,
                3: self.max_memory_mb, 4: self.max_retries}

    @classmethod
    def from_cbor(cls, value: object) -> ResourceBounds:
        """Strict decode."""
        m = expect_map(value, frozenset(range(5)), "bounds")
        return cls(max_input_tokens=expect_uint(m[0], "bounds.max_input_tokens"),
                   max_output_tokens=expect_uint(m[1], "bounds.max_output_tokens"),
                   max_wall_time_seconds=expect_uint(m[2], "bounds.max_wall_time_seconds"),
                   max_memory_mb=expect_uint(m[3], "bounds.max_memory_mb"),
                   max_retries=expect_uint(m[4], "bounds.max_retries"))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackInfo:
    """CallbackInfoV1: the actor handler that receives the result. ``CallbackInfo.NONE`` means no callback."""

    NONE: ClassVar[CallbackInfo]
    """Zero actor, empty handler, null payload, empty correlation id and context."""

    actor: bytes
    """20-byte actor address (all zero: no callback)."""
    handler: str
    """Handler name ("" iff no callback)."""
    payload: bytes | None = None
    """Bytes passed back to the handler (null: none; distinct from empty)."""
    correlation_id: str = ""
    """Caller's correlation id."""
    context: bytes = b""
    """Caller's opaque context."""

    @property
    def has_callback(self) -> bool:
        """True unless the actor is the zero address."""
        return self.actor != ZERO_ADDRESS

    def to_cbor(self) -> dict[int, Any]:
        """``{0: actor, 1: handler, 2: payload, 3: correlation_id, 4: context}``."""
        return {0: self.actor, 1: self.handler, 2: self.payload, 3: self.correlation_id, 4: self.context}

    @classmethod
    def from_cbor(cls, value: object) -> CallbackInfo:
        """Strict decode."""
        m = expect_map(value, frozenset(range(5)), "callback")
        return cls(actor=expect_bytes(m[0], "callback.actor", ADDRESS_LEN),
                   handler=expect_str(m[1], "callback.handler"),
                   payload=_opt_bytes(m[2], "callback.payload"),
                   correlation_id=expect_str(m[3], "callback.correlation_id"),
                   context=expect_bytes(m[4], "callback.context"))


CallbackInfo.NONE = CallbackInfo(actor=ZERO_ADDRESS, handler="")


def _attachments_from_cbor(value: object) -> tuple[Attachment, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(a, dict) for a in value):
        raise _err("attachments", "expected null or an array of maps")
    return tuple(value)


def _attachments_to_cbor(value: tuple[Attachment, ...] | None) -> list[Attachment] | None:
    return None if value is None else list(value)


# --------------------------------------------------------------------------- spec and request


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpecV1:
    """The stored job specification (CIP-11 §12.6), canonical map keys 0..11."""

    job_id: bytes
    """32-byte id (:func:`derive_job_id`)."""
    job_type: JobType
    """What to run."""
    bounds: ResourceBounds
    """Resource limits."""
    verification: VerificationConfig
    """How results are verified."""
    max_price: int
    """Most the submitter pays the runners (u64; escrowed with the tip)."""
    tip: int
    """Added to the payment (u64)."""
    timeout_blocks: int
    """Blocks from submission to the deadline."""
    callback: CallbackInfo
    """Who receives the result (``CallbackInfo.NONE``: nobody)."""
    submitter: bytes
    """20-byte address of the transaction sender or submitting actor."""
    submitted_at: int
    """Height of the block that executed the submission."""
    required_runner_pool: bytes | None
    """Runner pool the committee must come from (null: any)."""
    attachments: tuple[Attachment, ...] | None
    """CIP-9 volume attachments (null: none); opaque canonical maps."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical ``JobSpecV1`` map."""
        return {0: self.job_id, 1: self.job_type.to_cbor(), 2: self.bounds.to_cbor(), 3: self.verification.to_cbor(),
                4: self.max_price, 5: self.tip, 6: self.timeout_blocks, 7: self.callback.to_cbor(), 8: self.submitter,
                9: self.submitted_at, 10: self.required_runner_pool, 11: _attachments_to_cbor(self.attachments)}

    @classmethod
    def from_cbor(cls, value: object) -> JobSpecV1:
        """Strict decode: exactly keys 0..11, each of its schema type and fixed length."""
        m = expect_map(value, frozenset(range(12)), "job_spec")
        return cls(job_id=expect_bytes(m[0], "job_spec.job_id", HASH_LEN), job_type=job_type_from_cbor(m[1]),
                   bounds=ResourceBounds.from_cbor(m[2]), verification=VerificationConfig.from_cbor(m[3]),
                   max_price=expect_uint(m[4], "job_spec.max_price"), tip=expect_uint(m[5], "job_spec.tip"),
                   timeout_blocks=expect_uint(m[6], "job_spec.timeout_blocks"),
                   callback=CallbackInfo.from_cbor(m[7]),
                   submitter=expect_bytes(m[8], "job_spec.submitter", ADDRESS_LEN),
                   submitted_at=expect_uint(m[9], "job_spec.submitted_at"),
                   required_runner_pool=_opt_bytes(m[10], "job_spec.required_runner_pool"),
                   attachments=_attachments_from_cbor(m[11]))

    @property
    def request(self) -> JobRequest:
        """The submission fields of this spec."""
        return JobRequest(job_type=self.job_type, bounds=self.bounds, verification=self.verification,
                          max_price=self.max_price, tip=self.tip, timeout_blocks=self.timeout_blocks,
                          callback=self.callback, required_runner_pool=self.required_runner_pool,
                          attachments=self.attachments)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """What a JobSubmit transaction or an actor's ``submit_job`` carries: JobSpecV1 without job_id (0),
    submitter (8) and submitted_at (9); canonical map keys renumbered 0..8 in JobSpecV1 order (project choice)."""

    job_type: JobType
    """What to run."""
    bounds: ResourceBounds = ResourceBounds()
    """Resource limits."""
    verification: VerificationConfig = VerificationConfig.DEFAULT
    """How results are verified."""
    max_price: int
    """Most the submitter pays the runners (u64)."""
    tip: int = 0
    """Added to the payment (u64)."""
    timeout_blocks: int = 100
    """Blocks from submission to the deadline."""
    callback: CallbackInfo = CallbackInfo.NONE
    """Who receives the result."""
    required_runner_pool: bytes | None = None
    """Runner pool the committee must come from (null: any)."""
    attachments: tuple[Attachment, ...] | None = None
    """CIP-9 volume attachments (null: none)."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical ``{0: job_type, 1: bounds, 2: verification, 3: max_price, 4: tip, 5: timeout_blocks,
        6: callback, 7: required_runner_pool, 8: attachments}``."""
        return {0: self.job_type.to_cbor(), 1: self.bounds.to_cbor(), 2: self.verification.to_cbor(),
                3: self.max_price, 4: self.tip, 5: self.timeout_blocks, 6: self.callback.to_cbor(),
                7: self.required_runner_pool, 8: _attachments_to_cbor(self.attachments)}

    @classmethod
    def from_cbor(cls, value: object) -> JobRequest:
        """Strict decode: exactly keys 0..8."""
        m = expect_map(value, frozenset(range(9)), "job_request")
        return cls(job_type=job_type_from_cbor(m[0]), bounds=ResourceBounds.from_cbor(m[1]),
                   verification=VerificationConfig.from_cbor(m[2]),
                   max_price=expect_uint(m[3], "job_request.max_price"),
                   tip=expect_uint(m[4], "job_request.tip"),
                   timeout_blocks=expect_uint(m[5], "job_request.timeout_blocks"),
                   callback=CallbackInfo.from_cbor(m[6]),
                   required_runner_pool=_opt_bytes(m[7], "job_request.required_runner_pool"),
                   attachments=_attachments_from_cbor(m[8]))

    def to_spec(self, job_id: bytes, submitter: bytes, submitted_at: int) -> JobSpecV1:
        """The stored spec of this request once execution knows its id, submitter and height."""
        if len(job_id) != HASH_LEN or len(submitter) != ADDRESS_LEN:
            raise ValueError("job_id must be 32 bytes and submitter 20 bytes")
        return JobSpecV1(job_id=job_id, job_type=self.job_type, bounds=self.bounds, verification=self.verification,
                         max_price=self.max_price, tip=self.tip, timeout_blocks=self.timeout_blocks,
                         callback=self.callback, submitter=submitter, submitted_at=submitted_at,
                         required_runner_pool=self.required_runner_pool, attachments=self.attachments)


def canonical_job_spec(spec: JobSpecV1) -> bytes:
    """``canonical_job_spec``: the deterministic CBOR encoding of the JobSpecV1 map (§12.6)."""
    return encode(spec.to_cbor())


def job_spec_hash(spec: JobSpecV1) -> bytes:
    """``keccak256(canonical_job_spec(spec))`` (project choice)."""
    return keccak256(canonical_job_spec(spec))


def decode_job_spec(raw: bytes) -> JobSpecV1:
    """Strictly decode canonical JobSpecV1 bytes; any other input raises :class:`DecodeError`."""
    try:
        value = decode(raw)
    except CodecError as e:
        raise DecodeError(f"job_spec: {e}", field="job_spec") from None
    return JobSpecV1.from_cbor(value)


def canonical_job_request(req: JobRequest) -> bytes:
    """Deterministic CBOR encoding of the JobRequest map."""
    return encode(req.to_cbor())


def decode_job_request(raw: bytes) -> JobRequest:
    """Strictly decode canonical JobRequest bytes."""
    try:
        value = decode(raw)
    except CodecError as e:
        raise DecodeError(f"job_request: {e}", field="job_request") from None
    return JobRequest.from_cbor(value)


def derive_job_id(tx_hash: bytes, index: int) -> bytes:
    """``keccak256(b"cowboy-job-id-v1:" ‖ tx_hash ‖ u32_be(index))`` (project choice).

    ``index`` counts the jobs submitted by one transaction from 0 (a JobSubmit transaction: 0; several
    ``submit_job`` calls by actors in one transaction: 0, 1, 2, … in execution order).
    """
    if len(tx_hash) != HASH_LEN or not 0 <= index <= U32_MAX:
        raise ValueError("tx_hash must be 32 bytes and index a u32")
    return keccak256(JOB_ID_DOMAIN + tx_hash + struct.pack(">I", index))


# --------------------------------------------------------------------------- HTTP URL


def http_host(job: JobType) -> str | None:
    """Lower-cased host of an HTTP job's URL (IPv6 without brackets), for the capability filter; else None."""
    if not isinstance(job, HttpJob):
        return None
    parsed = parse_http_url(job.url)
    return None if parsed is None else parsed[1]


# --------------------------------------------------------------------------- validation


def _bad_type(message: str) -> ValidationError:
    return ValidationError("job_type_invalid", message, field="job_type")


def _nonempty(text: str, name: str) -> None:
    if not text:
        raise _bad_type(f"{name} must not be empty")


def _validate_http(job: HttpJob) -> None:
    if parse_http_url(job.url) is None:
        raise _bad_type("http.url must be an http:// or https:// URL with a host (printable ASCII, no user-info)")
    if job.method not in HTTP_METHODS:
        raise _bad_type(f"http.method must be one of {', '.join(HTTP_METHODS)}")
    if len(job.headers) > MAX_HTTP_HEADERS:
        raise _bad_type(f"http.headers: at most {MAX_HTTP_HEADERS} headers")
    for name, value in job.headers:
        if not name or len(name) > 256 or not _TCHAR.issuperset(name):
            raise _bad_type(f"http.headers: invalid header name {name!r}")
        if name.lower() in FORBIDDEN_HTTP_HEADERS:
            raise _bad_type(f"http.headers: {name!r} is set by the runner")
        if any((ch < " " and ch != "\t") or ch == "\x7f" for ch in value):
            raise _bad_type(f"http.headers: value of {name!r} has a control character")
    if job.body is not None and job.method in ("GET", "HEAD"):
        raise _bad_type(f"http.body must be null for {job.method}")


def _validate_job_type(job: JobType) -> None:
    if isinstance(job, LlmJob):
        _nonempty(job.prompt, "llm.prompt")
        if job.max_tokens < 1:
            raise _bad_type("llm.max_tokens must be at least 1")
        if job.temperature is not None and not (math.isfinite(job.temperature) and 0.0 <= job.temperature <= 2.0):
            raise _bad_type("llm.temperature must be a finite number in 0..2")
    elif isinstance(job, HttpJob):
        _validate_http(job)
    elif isinstance(job, McpJob):
        _nonempty(job.server, "mcp.server")
        _nonempty(job.tool_name, "mcp.tool_name")
        if job.timeout_seconds is not None and job.timeout_seconds < 1:
            raise _bad_type("mcp.timeout_seconds must be null or at least 1")
    elif isinstance(job, AgentJob):
        _nonempty(job.model, "agent.model")
        _nonempty(job.query, "agent.query")
        if job.max_iterations < 1 or job.timeout_seconds < 1:
            raise _bad_type("agent.max_iterations and agent.timeout_seconds must be at least 1")
    elif not isinstance(job, (CustomJob, PublishChainRootJob)):
        raise _bad_type(f"unknown job type {type(job).__name__}")
    # Fixed lengths and integer ranges: a request built in Python (not decoded) may still violate them.
    try:
        job_type_from_cbor(decode(encode(job.to_cbor())))
    except (CodecError, DecodeError) as e:
        raise _bad_type(f"{type(job).__name__}: {e}") from None


def validate_request(req: JobRequest, *, commit_phase_permille: int = 600,
                     max_request_bytes: int = MAX_REQUEST_BYTES) -> None:
    """Apply the submission rules; raise :class:`ValidationError` with a stable code on the first failure.

    Order and codes: ``job_type_invalid``; ``job_bounds_invalid``; the verification codes of
    :func:`~cowboy_protocol.types.jobspec_checks.validate_verification`; ``job_price_invalid`` (max_price ≥ 1, both
    amounts u64); ``job_timeout_invalid`` (``timeout_blocks`` in [10, 100_000] leaving ≥ 1 block to each of the
    commit phase ``timeout·permille/1000`` and the reveal phase); ``job_callback_invalid``; ``job_pool_invalid``;
    ``job_attachments_unsupported`` (this node implements no CIP-9 volumes); ``job_too_large`` (canonical
    request over ``max_request_bytes``).
    """
    _validate_job_type(req.job_type)
    b = req.bounds
    if b.max_wall_time_seconds < 1 or b.max_memory_mb < 1 or any(not 0 <= v <= U64_MAX for v in b.to_cbor().values()):
        raise ValidationError("job_bounds_invalid", "bounds.max_wall_time_seconds and max_memory_mb must be ≥ 1 "
                                                    "and all bounds u64", field="bounds")
    validate_verification(req.verification)
    if not 1 <= req.max_price <= U64_MAX or not 0 <= req.tip <= U64_MAX:
        raise ValidationError("job_price_invalid", "max_price must be in 1..2^64-1 and tip in 0..2^64-1",
                              field="max_price")
    t = req.timeout_blocks
    commit = t * commit_phase_permille // 1000
    if not MIN_TIMEOUT_BLOCKS <= t <= MAX_TIMEOUT_BLOCKS or commit < 1 or t - commit < 1:
        raise ValidationError("job_timeout_invalid", f"timeout_blocks must be in [{MIN_TIMEOUT_BLOCKS}, "
                                                     f"{MAX_TIMEOUT_BLOCKS}] with room for commit and reveal phases",
                              field="timeout_blocks")
    _validate_callback(req.callback)
    pool = req.required_runner_pool
    if pool is not None and not 1 <= len(pool) <= MAX_POOL_BYTES:
        raise ValidationError("job_pool_invalid", f"required_runner_pool must be null or 1..{MAX_POOL_BYTES} bytes",
                              field="required_runner_pool")
    if req.attachments:
        raise ValidationError("job_attachments_unsupported",
                              "attachments (CIP-9 volumes) are not supported by this node", field="attachments")
    try:
        size = len(canonical_job_request(req))
    except CodecError as e:
        raise ValidationError("invalid_job_spec", f"job request not encodable: {e}") from None
    if size > max_request_bytes:
        raise ValidationError("job_too_large", f"canonical job request is {size} bytes, limit {max_request_bytes}")


def _validate_callback(cb: CallbackInfo) -> None:
    def bad(message: str) -> ValidationError:
        return ValidationError("job_callback_invalid", f"callback: {message}", field="callback")

    if len(cb.actor) != ADDRESS_LEN:
        raise bad("actor must be 20 bytes")
    if not cb.has_callback:
        if cb != CallbackInfo.NONE:
            raise bad("a zero actor means no callback: handler, payload, correlation_id and context must be empty")
        return
    if not cb.handler:
        raise bad("handler must not be empty when an actor is set")
    if _utf8_len(cb.handler) > MAX_HANDLER_BYTES:
        raise bad(f"handler longer than {MAX_HANDLER_BYTES} UTF-8 bytes")
    if cb.payload is not None and len(cb.payload) > MAX_CALLBACK_PAYLOAD_BYTES:
        raise bad(f"payload longer than {MAX_CALLBACK_PAYLOAD_BYTES} bytes")
    if _utf8_len(cb.correlation_id) > MAX_CORRELATION_ID_BYTES:
        raise bad(f"correlation_id longer than {MAX_CORRELATION_ID_BYTES} UTF-8 bytes")
    if len(cb.context) > MAX_CALLBACK_CONTEXT_BYTES:
        raise bad(f"context longer than {MAX_CALLBACK_CONTEXT_BYTES} bytes")
