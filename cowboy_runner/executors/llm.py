"""LLM job executor (job kind 0x00): one chat completion on an operator-configured OpenAI-compatible endpoint."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from cowboy_protocol.jobs.json_schema import BudgetExceeded, Meter, load_schema, schema_accepts
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.errors import ValidationError
from cowboy_protocol.types.jobspec import JobType, LlmJob, ResourceBounds
from cowboy_runner.executors.base import (
    ExecutionResult,
    ExecutorError,
    canonical_json,
    check_output_size,
)
from cowboy_runner.executors.config import LlmConfig
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


class LlmExecutor:
    """Executes :class:`~cowboy_protocol.types.jobspec.LlmJob`; see docs/runner-executors.md §LLM."""

    def __init__(self, config: LlmConfig, *, max_output_bytes: int) -> None:
        self.config = config
        """Settings."""
        self.max_output_bytes = max_output_bytes
        """Largest result returned."""

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Run the completion within ``deadline_s`` seconds or the operator's ``timeout_s``, whichever is shorter."""
        if not isinstance(job, LlmJob):
            raise ExecutorError("unsupported_job_type", f"LLM executor cannot run {type(job).__name__}")
        model = self.config.models.get(job.model_id)
        if model is None:
            raise ExecutorError("unsupported_model", f"model_id {job.model_id.hex()} is not served by this runner")
        validator = None if job.response_model is None else SchemaValidator(job.response_model)
        request = self.build_request(job, bounds, model, validator)
        return await with_operator_limit(self._run(request, validator, bounds, model), deadline_s,
                                         self.config.timeout_s, "executors.llm.timeout_s")

    def build_request(self, job: LlmJob, bounds: ResourceBounds | None, model: str,
                      validator: SchemaValidator | None) -> dict[str, Any]:
        """The chat-completions request body of a job."""
        messages = [] if job.system_prompt is None else [{"role": "system", "content": job.system_prompt}]
        messages.append({"role": "user", "content": job.prompt})
        max_tokens = job.max_tokens if bounds is None else min(job.max_tokens, bounds.max_output_tokens)
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

    async def _run(self, request: dict[str, Any], validator: SchemaValidator | None,
                   bounds: ResourceBounds | None, model: str) -> ExecutionResult:
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        try:
            async with aiohttp.ClientSession() as session, \
                    session.post(url, data=json.dumps(request).encode(), headers=headers) as resp:
                raw = await read_limited(resp, self.config.max_response_bytes)
                status = resp.status
        except aiohttp.ClientError as e:
            raise ExecutorError("upstream_error", f"LLM endpoint: {e}") from None
        if not 200 <= status < 300:
            raise ExecutorError("upstream_error", f"LLM endpoint answered HTTP {status}: {raw[:300]!r}",
                                detail={"status": status})
        try:
            reply = json.loads(raw)
            content = reply["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ExecutorError("upstream_error", "LLM endpoint reply is not a chat completion") from None
        if not isinstance(content, str):
            raise ExecutorError("upstream_error", "LLM reply has no text content")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        total = _int(usage.get("total_tokens"))
        prompt_tokens = _int(usage.get("prompt_tokens"))
        if total is None:
            total = (prompt_tokens or 0) + (_int(usage.get("completion_tokens")) or 0)
        if bounds is not None and prompt_tokens is not None and prompt_tokens > bounds.max_input_tokens:
            raise ExecutorError("input_too_large", f"prompt used {prompt_tokens} tokens, over max_input_tokens "
                                                   f"{bounds.max_input_tokens}")
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
        detail: dict[str, object] = {"model": model, "finish_reason": reply["choices"][0].get("finish_reason"),
                                     "prompt_tokens": prompt_tokens, "total_tokens": total}
        return ExecutionResult(check_output_size(output, self.max_output_bytes), total, detail)
