"""JSON form of job requests and specs (``cowboy-node tx submit-job --spec FILE.json``, RPC job views).

Conventions (docs/jobs.md "JobSpec JSON form"): byte fields are ``0x``-hex strings; addresses are ``0x`` + 40
hex digits (EIP-55 on output, lower/upper case or valid EIP-55 on input); the amounts ``max_price`` and ``tip``
are decimal strings on output and a decimal string or a JSON integer on input; enums are their snake_case
names; omitted optional fields take documented defaults. Unknown keys are errors. Every error is a
:class:`ValidationError` with code ``invalid_job_spec`` whose message starts with the JSON path.

Parsing checks the *shape*; the protocol rules are :func:`~cowboy_protocol.types.jobspec.validate_request`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto.address import InvalidAddress, parse_address, to_checksum_address
from cowboy_protocol.types.fields import U64_MAX
from cowboy_protocol.types.jobspec import (
    AgentJob,
    Attachment,
    CallbackInfo,
    CustomJob,
    Freshness,
    HttpJob,
    JobRequest,
    JobSpecV1,
    JobType,
    LlmJob,
    McpJob,
    PublishChainRootJob,
    ResourceBounds,
    job_spec_hash,
)
from cowboy_protocol.types.jobspec_checks import (
    CHECK_KIND_NAMES,
    CHECK_KINDS,
    CustomCheck,
    DnsCnameMatchCheck,
    DnsTxtRecordMatchCheck,
    JsonSchemaValidCheck,
    MajorityVoteCheck,
    NumericRangeCheck,
    NumericToleranceCheck,
    StructuredMatchCheck,
    VerificationConfig,
    VerificationMode,
    VerifierCheck,
    json_value_to_cbor,
)
from cowboy_protocol.types.runner import JOB_KIND_NAMES, JOB_KINDS
from cowboy_protocol.types.validation_errors import ValidationError

__all__ = ["job_request_to_json", "job_spec_to_json", "parse_job_request_json"]

CODE = "invalid_job_spec"
_MISSING: Any = object()


def _fail(path: str, message: str) -> ValidationError:
    return ValidationError(CODE, f"{path}: {message}", field=path)


class _Obj:
    """A JSON object being read: takes keys one by one, then :meth:`done` rejects any key not taken."""

    def __init__(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, "expected an object")
        self.value: dict[str, Any] = value
        self.path = path
        self.taken: set[str] = set()

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, default: Any = _MISSING) -> Any:
        self.taken.add(key)
        if key in self.value:
            return self.value[key]
        if default is _MISSING:
            raise _fail(self.at(key), "missing")
        return default

    def done(self) -> None:
        unknown = sorted(str(k) for k in self.value if k not in self.taken)
        if unknown:
            raise _fail(self.at(unknown[0]), "unknown key")

    # typed readers
    def uint(self, key: str, default: Any = _MISSING) -> int:
        v = self.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U64_MAX:
            raise _fail(self.at(key), "expected an unsigned integer (u64)")
        return v

    def opt_uint(self, key: str) -> int | None:
        return None if self.get(key, None) is None else self.uint(key)

    def amount(self, key: str, default: Any = _MISSING) -> int:
        v = self.get(key, default)
        if isinstance(v, str) and v.isascii() and v.isdigit() and (v == "0" or not v.startswith("0")):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U64_MAX:
            raise _fail(self.at(key), "expected a decimal string or integer in 0..2^64-1")
        return v

    def text(self, key: str, default: Any = _MISSING) -> str:
        v = self.get(key, default)
        if not isinstance(v, str):
            raise _fail(self.at(key), "expected a string")
        return v

    def opt_text(self, key: str) -> str | None:
        return None if self.get(key, None) is None else self.text(key)

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise _fail(self.at(key), "expected true or false")
        return v

    def number(self, key: str) -> float:
        v = self.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _fail(self.at(key), "expected a number")
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise _fail(self.at(key), "expected a finite number")
        return f

    def opt_number(self, key: str) -> float | None:
        return None if self.get(key, None) is None else self.number(key)

    def hexbytes(self, key: str, default: Any = _MISSING, length: int | None = None) -> bytes:
        return _hex(self.get(key, default), self.at(key), length)

    def opt_hexbytes(self, key: str) -> bytes | None:
        return None if self.get(key, None) is None else self.hexbytes(key)

    def address(self, key: str) -> bytes:
        v = self.get(key)
        try:
            return parse_address(v)
        except InvalidAddress as e:
            raise _fail(self.at(key), str(e)) from None


def _hex(value: object, path: str, length: int | None = None) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise _fail(path, "expected a 0x-prefixed hex string")
    try:
        raw = bytes.fromhex(value[2:])
    except ValueError:
        raise _fail(path, "invalid hex (needs an even number of hex digits)") from None
    if len(value) != 2 + 2 * len(raw):  # bytes.fromhex skips whitespace; hex text must not contain any
        raise _fail(path, "invalid hex")
    if length is not None and len(raw) != length:
        raise _fail(path, f"expected {length} bytes, got {len(raw)}")
    return raw


def _h(data: bytes) -> str:
    return "0x" + data.hex()


def _oh(data: bytes | None) -> str | None:
    return None if data is None else _h(data)


# --------------------------------------------------------------------------- job types


def _llm(o: _Obj) -> LlmJob:
    return LlmJob(model_id=o.hexbytes("model_id", length=32), prompt=o.text("prompt"),
                  system_prompt=o.opt_text("system_prompt"), temperature=o.opt_number("temperature"),
                  max_tokens=o.uint("max_tokens"), response_model=o.opt_text("response_model"))


def _http(o: _Obj) -> HttpJob:
    headers = _Obj(o.get("headers", {}), o.at("headers"))
    pairs = tuple((name, headers.text(name)) for name in sorted(headers.value))
    headers.done()
    fresh_raw = o.get("freshness", None)
    freshness = None
    if fresh_raw is not None:
        f = _Obj(fresh_raw, o.at("freshness"))
        freshness = Freshness(max_age_seconds=f.uint("max_age_seconds"), cache_control=f.opt_text("cache_control"),
                              timestamp_field=f.opt_text("timestamp_field"))
        f.done()
    return HttpJob(url=o.text("url"), method=o.text("method", "GET"), headers=pairs, body=o.opt_hexbytes("body"),
                   extraction=o.opt_text("extraction"), freshness=freshness)


def _mcp(o: _Obj) -> McpJob:
    arguments = json_value_to_cbor(o.get("arguments", {}), path=o.at("arguments"), code=CODE)
    return McpJob(server=o.text("server"), tool_name=o.text("tool_name"), arguments=arguments,
                  timeout_seconds=o.opt_uint("timeout_seconds"))


def _custom(o: _Obj) -> CustomJob:
    return CustomJob(executor_hash=o.hexbytes("executor_hash", length=32), params=o.hexbytes("params", "0x"))


def _publish(o: _Obj) -> PublishChainRootJob:
    return PublishChainRootJob(src_chain_id=o.uint("src_chain_id"), dst_chain_id=o.uint("dst_chain_id"),
                               height=o.uint("height"), registry_address=o.address("registry_address"))


def _agent(o: _Obj) -> AgentJob:
    return AgentJob(model=o.text("model"), query=o.text("query"), system_prompt_path=o.opt_text("system_prompt_path"),
                    system_prompt_inline=o.opt_text("system_prompt_inline"), session_id=o.opt_text("session_id"),
                    session_dir=o.opt_text("session_dir"), max_iterations=o.uint("max_iterations"),
                    max_tool_calls_per_iter=o.uint("max_tool_calls_per_iter"),
                    timeout_seconds=o.uint("timeout_seconds"))


_JOB_PARSERS: dict[str, Callable[[_Obj], JobType]] = {
    "llm": _llm, "http": _http, "mcp": _mcp, "custom": _custom, "publish_chain_root": _publish, "agent": _agent,
}


def _job_type(value: object) -> JobType:
    o = _Obj(value, "job_type")
    kind = o.text("kind")
    if kind not in _JOB_PARSERS:
        raise _fail("job_type.kind", f"unknown job kind {kind!r}, expected one of {', '.join(JOB_KINDS)}")
    try:
        job = _JOB_PARSERS[kind](o)
    except ValidationError as e:
        if e.code == CODE:
            raise
        raise _fail("job_type", e.message) from None  # e.g. a duplicate header from HttpJob
    o.done()
    return job


def _job_type_json(job: JobType) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": JOB_KIND_NAMES[job.KIND]}
    if isinstance(job, LlmJob):
        out.update(model_id=_h(job.model_id), prompt=job.prompt, system_prompt=job.system_prompt,
                   temperature=job.temperature, max_tokens=job.max_tokens, response_model=job.response_model)
    elif isinstance(job, HttpJob):
        fresh = job.freshness
        out.update(url=job.url, method=job.method, headers=dict(job.headers), body=_oh(job.body),
                   extraction=job.extraction,
                   freshness=None if fresh is None else {"max_age_seconds": fresh.max_age_seconds,
                                                         "cache_control": fresh.cache_control,
                                                         "timestamp_field": fresh.timestamp_field})
    elif isinstance(job, McpJob):
        out.update(server=job.server, tool_name=job.tool_name, arguments=job.arguments,
                   timeout_seconds=job.timeout_seconds)
    elif isinstance(job, CustomJob):
        out.update(executor_hash=_h(job.executor_hash), params=_h(job.params))
    elif isinstance(job, PublishChainRootJob):
        out.update(src_chain_id=job.src_chain_id, dst_chain_id=job.dst_chain_id, height=job.height,
                   registry_address=to_checksum_address(job.registry_address))
    else:
        out.update(model=job.model, query=job.query, system_prompt_path=job.system_prompt_path,
                   system_prompt_inline=job.system_prompt_inline, session_id=job.session_id,
                   session_dir=job.session_dir, max_iterations=job.max_iterations,
                   max_tool_calls_per_iter=job.max_tool_calls_per_iter, timeout_seconds=job.timeout_seconds)
    return out


# --------------------------------------------------------------------------- checks, verification


def _check(value: object, path: str) -> VerifierCheck:
    o = _Obj(value, path)
    kind = o.text("kind")
    check: VerifierCheck
    if kind == "majority_vote":
        check = MajorityVoteCheck(field=o.text("field"))
    elif kind == "json_schema_valid":
        check = JsonSchemaValidCheck(schema=o.text("schema"))
    elif kind == "structured_match":
        raw = o.get("fields")
        if not isinstance(raw, list) or not all(isinstance(f, str) for f in raw):
            raise _fail(o.at("fields"), "expected an array of strings")
        check = StructuredMatchCheck(fields=tuple(raw))
    elif kind == "numeric_tolerance":
        check = NumericToleranceCheck(field=o.text("field"), tolerance=o.number("tolerance"))
    elif kind == "numeric_range":
        check = NumericRangeCheck(field=o.text("field"), min=o.number("min"), max=o.number("max"))
    elif kind == "custom":
        check = CustomCheck(actor_hex=o.text("actor"), method=o.text("method"))
    elif kind == "dns_txt_record_match":
        check = DnsTxtRecordMatchCheck(fqdn=o.text("fqdn"), expected_value=o.text("expected_value"),
                                       min_resolvers=o.uint("min_resolvers"))
    elif kind == "dns_cname_match":
        check = DnsCnameMatchCheck(fqdn=o.text("fqdn"), expected_target=o.text("expected_target"),
                                   min_resolvers=o.uint("min_resolvers"))
    else:
        raise _fail(o.at("kind"), f"unknown check kind {kind!r}, expected one of {', '.join(CHECK_KINDS)}")
    o.done()
    return check


def _check_json(c: VerifierCheck) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": CHECK_KIND_NAMES[c.KIND]}
    if isinstance(c, MajorityVoteCheck):
        out["field"] = c.field
    elif isinstance(c, JsonSchemaValidCheck):
        out["schema"] = c.schema
    elif isinstance(c, StructuredMatchCheck):
        out["fields"] = list(c.fields)
    elif isinstance(c, NumericToleranceCheck):
        out.update(field=c.field, tolerance=c.tolerance)
    elif isinstance(c, NumericRangeCheck):
        out.update(field=c.field, min=c.min, max=c.max)
    elif isinstance(c, CustomCheck):
        out.update(actor=c.actor_hex, method=c.method)
    elif isinstance(c, DnsTxtRecordMatchCheck):
        out.update(fqdn=c.fqdn, expected_value=c.expected_value, min_resolvers=c.min_resolvers)
    else:
        out.update(fqdn=c.fqdn, expected_target=c.expected_target, min_resolvers=c.min_resolvers)
    return out


_MODES = {m.name.lower(): m for m in VerificationMode}


def _verification(value: object) -> VerificationConfig:
    o = _Obj(value, "verification")
    mode_name = o.text("mode", "none")
    if mode_name not in _MODES:
        raise _fail("verification.mode", f"unknown mode {mode_name!r}, expected one of {', '.join(_MODES)}")
    runners = o.uint("runners", 1)
    raw_checks = o.get("checks", [])
    if not isinstance(raw_checks, list):
        raise _fail("verification.checks", "expected an array")
    cfg = VerificationConfig(
        mode=_MODES[mode_name], runners=runners, threshold=o.uint("threshold", runners // 2 + 1),
        checks=tuple(_check(c, f"verification.checks[{i}]") for i, c in enumerate(raw_checks)),
        tee_required=o.boolean("tee_required", False), dispute_window_blocks=o.uint("dispute_window_blocks", 0),
        required_tee_type=o.opt_text("required_tee_type"))
    o.done()
    return cfg


def _verification_json(v: VerificationConfig) -> dict[str, Any]:
    return {"mode": v.mode.name.lower(), "runners": v.runners, "threshold": v.threshold,
            "checks": [_check_json(c) for c in v.checks], "tee_required": v.tee_required,
            "dispute_window_blocks": v.dispute_window_blocks, "required_tee_type": v.required_tee_type}


# --------------------------------------------------------------------------- bounds, callback, attachments

_BOUND_NAMES = ("max_input_tokens", "max_output_tokens", "max_wall_time_seconds", "max_memory_mb", "max_retries")


def _bounds(value: object) -> ResourceBounds:
    o = _Obj(value, "bounds")
    default = ResourceBounds()
    b = ResourceBounds(**{n: o.uint(n, getattr(default, n)) for n in _BOUND_NAMES})
    o.done()
    return b


def _callback(value: object) -> CallbackInfo:
    if value is None:
        return CallbackInfo.NONE
    o = _Obj(value, "callback")
    cb = CallbackInfo(actor=o.address("actor"), handler=o.text("handler"), payload=o.opt_hexbytes("payload"),
                      correlation_id=o.text("correlation_id", ""), context=o.hexbytes("context", "0x"))
    o.done()
    return cb


def _callback_json(cb: CallbackInfo) -> dict[str, Any] | None:
    if cb == CallbackInfo.NONE:
        return None
    return {"actor": to_checksum_address(cb.actor), "handler": cb.handler, "payload": _oh(cb.payload),
            "correlation_id": cb.correlation_id, "context": _h(cb.context)}


def _attachments(value: object) -> tuple[Attachment, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail("attachments", "expected null or an array of 0x-hex canonical CBOR maps")
    out = []
    for i, item in enumerate(value):
        path = f"attachments[{i}]"
        try:
            decoded = decode(_hex(item, path))
        except CodecError as e:
            raise _fail(path, f"not canonical CBOR: {e}") from None
        if not isinstance(decoded, dict):
            raise _fail(path, "expected a CBOR map")
        out.append(decoded)
    return tuple(out)


# --------------------------------------------------------------------------- entry points


def parse_job_request_json(doc: object) -> JobRequest:
    """Parse the JSON form of a job request (shape only; call ``validate_request`` for the rules).

    Defaults: ``bounds`` fields from :class:`ResourceBounds`; ``verification`` mode ``none``, runners 1,
    threshold ``runners // 2 + 1``, no checks, no TEE, dispute window 0; ``tip`` 0; ``timeout_blocks`` 100;
    ``callback`` null (no callback); ``required_runner_pool`` and ``attachments`` null. Raises
    :class:`ValidationError` (code ``invalid_job_spec``) naming the JSON path.
    """
    o = _Obj(doc, "")
    req = JobRequest(job_type=_job_type(o.get("job_type")), bounds=_bounds(o.get("bounds", {})),
                     verification=_verification(o.get("verification", {})), max_price=o.amount("max_price"),
                     tip=o.amount("tip", 0), timeout_blocks=o.uint("timeout_blocks", 100),
                     callback=_callback(o.get("callback", None)),
                     required_runner_pool=o.opt_hexbytes("required_runner_pool"),
                     attachments=_attachments(o.get("attachments", None)))
    o.done()
    return req


def job_request_to_json(req: JobRequest) -> dict[str, Any]:
    """The JSON form of ``req`` with every field present (``parse_job_request_json`` inverts it)."""
    return {
        "job_type": _job_type_json(req.job_type),
        "bounds": {n: getattr(req.bounds, n) for n in _BOUND_NAMES},
        "verification": _verification_json(req.verification),
        "max_price": str(req.max_price),
        "tip": str(req.tip),
        "timeout_blocks": req.timeout_blocks,
        "callback": _callback_json(req.callback),
        "required_runner_pool": _oh(req.required_runner_pool),
        "attachments": None if req.attachments is None else [_h(encode(a)) for a in req.attachments],
    }


def job_spec_to_json(spec: JobSpecV1) -> dict[str, Any]:
    """RPC view of a stored spec: the request fields plus ``job_id``, ``submitter`` (EIP-55), ``submitted_at``
    and ``job_spec_hash``."""
    return {"job_id": _h(spec.job_id), "job_spec_hash": _h(job_spec_hash(spec)),
            "submitter": to_checksum_address(spec.submitter), "submitted_at": spec.submitted_at,
            **job_request_to_json(spec.request)}
