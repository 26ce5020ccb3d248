"""LLM job executor (job kind 0x00): one chat completion on an operator-configured OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Callable
from typing import Any, Protocol

import aiohttp

from cowboy_protocol.jobs.json_schema import BudgetExceeded, Meter, load_schema, schema_accepts
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.jobspec import JobType, LlmJob, ResourceBounds
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner.executors.base import (
    ExecutionResult,
    ExecutorError,
    canonical_json,
    check_output_size,
)
from cowboy_runner.executors.config import LlmConfig, operator_deadline
from cowboy_runner.executors.http import read_limited, with_operator_limit

try:  # optional: only for response schemas outside the node's deterministic subset
    import jsonschema
except ImportError:  # pragma: no cover - depends on the environment
    jsonschema = None


class SchemaValidator:
    """Validates replies against a ``response_model`` JSON schema.

    Schemas inside the node's json_schema_valid subset (``cowboy_protocol/jobs/json_schema.py``) are evaluated with
    it, so the runner judges exactly as the verifier's checks would; any other schema (``$ref``, ``pattern``,
    ``format``…) uses the ``jsonschema`` package (Draft 2020-12) when installed, else ``schema_unsupported``.
    """

    def __init__(self, schema_text: str) -> None:
        try:
            self.schema: Any = parse_json(schema_text)
        except ValidationError as e:
            raise ExecutorError("schema_invalid", f"response_model is not JSON: {e.message}") from None
        if not isinstance(self.schema, dict | bool):
            raise ExecutorError("schema_invalid", "response_model must be a JSON object (a JSON schema)")
        self._subset: Any = None
        self._full: Any = None
        try:
            self._subset = load_schema(schema_text)
        except ValidationError:
            if jsonschema is None:
                raise ExecutorError("schema_unsupported", "response_model uses keywords outside the supported "
                                                          "subset and the jsonschema package is missing") from None
            try:
                cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft202012Validator)
                cls.check_schema(self.schema)
                self._full = cls(self.schema)
            except jsonschema.SchemaError as e:
                raise ExecutorError("schema_invalid", f"response_model is not a valid schema: {e.message}") from None

    def accepts(self, value: Any) -> bool:
        """True iff ``value`` is valid against the schema."""
        if self._full is not None:
            return bool(self._full.is_valid(value))
        try:
            return schema_accepts(self._subset, value, Meter())
        except BudgetExceeded:
            return False


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Answers retried with backoff (rate limited, or a transient server error)."""
REDACTED = "[redacted]"
"""What replaces a secret in error text."""


class LlmObserver(Protocol):
    """Receives one call per completion attempt's outcome (the runner's metrics, ``RunnerMetrics``)."""

    def llm_call(self, model: str, outcome: str, prompt_tokens: int, completion_tokens: int, price: int) -> None:
        """``outcome``: ``ok`` or a failure code; ``price``: what the rate card charges for a success (else 0)."""


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret (and so its ``Bearer`` form) replaced by :data:`REDACTED`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP-date, RFC 9110 §10.2.3); None when
    absent or unreadable. ``now`` is the wall clock (an HTTP-date is absolute)."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def prompt_chars(job: LlmJob) -> int:
    """Characters of the prompt text sent (system prompt + user prompt)."""
    return len(job.prompt) + len(job.system_prompt or "")


class LlmExecutor:
    """Executes :class:`~cowboy_protocol.types.jobspec.LlmJob`; see docs/runner-executors.md §LLM."""

    def __init__(self, config: LlmConfig, *, max_output_bytes: int, observer: LlmObserver | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        """Settings."""
        self.max_output_bytes = max_output_bytes
        """Largest result returned."""
        self.observer = observer
        """Per-model token and price metrics (None: not recorded)."""
        self._clock = clock  # wall clock, for Retry-After HTTP-dates

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Run the completion within ``deadline_s`` seconds or the operator's ``timeout_s``, whichever is shorter."""
        if not isinstance(job, LlmJob):
            raise ExecutorError("unsupported_job_type", f"LLM executor cannot run {type(job).__name__}")
        model = self.config.models.get(job.model_id)
        if model is None:
            raise ExecutorError("unsupported_model", f"model_id {job.model_id.hex()} is not served by this runner")
        if bounds is not None and prompt_chars(job) > bounds.max_input_tokens * self.config.max_chars_per_token:
            # Refused before the endpoint is paid; the exact count is only known after the call (checked again).
            raise ExecutorError("input_too_large", f"prompt of {prompt_chars(job)} characters is surely over "
                                f"max_input_tokens {bounds.max_input_tokens} (at most "
                                f"{self.config.max_chars_per_token:g} characters per token)",
                                detail={"phase": "before_call", "chars": prompt_chars(job)})
        validator = None if job.response_model is None else SchemaValidator(job.response_model)
        request = self.build_request(job, bounds, model, validator)
        limit = operator_deadline(deadline_s, self.config.timeout_s)
        ends_at = asyncio.get_running_loop().time() + limit
        try:
            result = await with_operator_limit(self._run(request, validator, bounds, model, ends_at), deadline_s,
                                               self.config.timeout_s, "executors.llm.timeout_s")
        except ExecutorError as e:
            self._observe(model, e.code, e.detail)
            raise self._redacted(e) from None
        self._observe(model, "ok", result.detail, result.usage_units)
        return result

    def _observe(self, model: str, outcome: str, detail: dict[str, object], units: int | None = None) -> None:
        if self.observer is None:
            return
        prompt = _int(detail.get("prompt_tokens")) or 0
        completion = _int(detail.get("completion_tokens")) or 0
        price = 0
        if units is not None and self.config.price is not None:
            base, per_unit = self.config.price
            price = base + per_unit * units
        self.observer.llm_call(model, outcome, prompt, completion, price)

    def _redacted(self, e: ExecutorError) -> ExecutorError:
        """``e`` with the API key removed from its message and detail (endpoints echo requests in errors)."""
        secrets = (self.config.api_key or "",)
        e.message = redact(e.message, secrets)
        e.args = (f"{e.code}: {e.message}",)
        e.detail = {k: redact(v, secrets) if isinstance(v, str) else v for k, v in e.detail.items()}
        return e

    def build_request(self, job: LlmJob, bounds: ResourceBounds | None, model: str,
                      validator: SchemaValidator | None) -> dict[str, Any]:
        """The chat-completions request body of a job."""
        messages = [] if job.system_prompt is None else [{"role": "system", "content": job.system_prompt}]
        messages.append({"role": "user", "content": job.prompt})
        max_tokens = min(job.max_tokens, self.config.max_tokens)
        if bounds is not None:
            max_tokens = min(max_tokens, bounds.max_output_tokens)
        body: dict[str, Any] = {
            "model": model, "messages": messages, "max_tokens": max_tokens,
            "temperature": self.config.default_temperature if job.temperature is None else job.temperature,
        }
        if validator is not None:
            if self.config.response_format == "json_schema":
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "response", "schema": validator.schema}}
            else:
                body["response_format"] = {"type": "json_object"}
        return body

    async def _post(self, session: aiohttp.ClientSession, request: dict[str, Any],
                    ends_at: float) -> tuple[int, bytes, int]:
        """POST the request, retrying 429/5xx with backoff; (status, body, attempts) of the last answer."""
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        data = json.dumps(request).encode()
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            async with session.post(url, data=data, headers=headers) as resp:
                raw = await read_limited(resp, self.config.max_response_bytes)
                status, retry_after = resp.status, resp.headers.get("Retry-After")
            if status not in RETRY_STATUSES or attempt >= self.config.max_retries:
                return status, raw, attempt + 1
            asked = retry_after_seconds(retry_after, self._clock())
            delay = asked if asked is not None else self.config.retry_base_delay_s * 2 ** attempt
            if delay > self.config.retry_max_delay_s or loop.time() + delay >= ends_at:
                # Waiting longer than the operator allows, or past the deadline: fail now with the real reason.
                return status, raw, attempt + 1
            attempt += 1
            await asyncio.sleep(delay)

    async def _run(self, request: dict[str, Any], validator: SchemaValidator | None,
                   bounds: ResourceBounds | None, model: str, ends_at: float) -> ExecutionResult:
        try:
            async with aiohttp.ClientSession() as session:
                status, raw, attempts = await self._post(session, request, ends_at)
        except aiohttp.ClientError as e:
            raise ExecutorError("upstream_error", f"LLM endpoint: {e}") from None
        if not 200 <= status < 300:
            code = "rate_limited" if status == 429 else "upstream_error"
            raise ExecutorError(code, f"LLM endpoint answered HTTP {status} after {attempts} attempt(s): "
                                      f"{raw[:300]!r}", detail={"status": status, "attempts": attempts})
        try:
            reply = json.loads(raw)
            choice = reply["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ExecutorError("upstream_error", "LLM endpoint reply is not a chat completion") from None
        if not isinstance(content, str):
            raise ExecutorError("upstream_error", "LLM reply has no text content")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        total = _int(usage.get("total_tokens"))
        prompt_tokens = _int(usage.get("prompt_tokens"))
        completion_tokens = _int(usage.get("completion_tokens"))
        if total is None:
            total = (prompt_tokens or 0) + (completion_tokens or 0)
        tokens: dict[str, object] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        if bounds is not None and prompt_tokens is not None and prompt_tokens > bounds.max_input_tokens:
            raise ExecutorError("input_too_large", f"prompt used {prompt_tokens} tokens, over max_input_tokens "
                                                   f"{bounds.max_input_tokens}", detail=tokens)
        if choice.get("finish_reason") == "length":
            # A reply cut at max_tokens is not the answer that was asked for (and JSON would be broken).
            raise ExecutorError("output_truncated", f"reply cut off at max_tokens {request['max_tokens']} "
                                                    "(finish_reason = length)", detail=tokens)
        if validator is None:
            try:
                output = content.encode("utf-8")
            except UnicodeEncodeError:
                raise ExecutorError("upstream_error", "LLM reply text is not valid Unicode") from None
        else:
            try:
                value = parse_json(content)
            except ValidationError as e:
                raise ExecutorError("schema_mismatch", f"reply is not JSON: {e.message}") from None
            if not validator.accepts(value):
                raise ExecutorError("schema_mismatch", "reply does not match response_model")
            output = canonical_json(value)
        detail: dict[str, object] = {"model": model, "finish_reason": choice.get("finish_reason"),
                                     "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                     "total_tokens": total, "attempts": attempts}
        return ExecutionResult(check_output_size(output, self.max_output_bytes), total, detail)
