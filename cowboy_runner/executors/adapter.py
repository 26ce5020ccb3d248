"""External-adapter executor (docs/runner-executors.md "External adapters"): a job of a kind the runner has no
executor for is POSTed to the operator's own service, Chainlink-external-adapter style, and the service's answer
becomes the result.

Request (``POST {url}``, ``Content-Type: application/json``, plus the adapter's ``headers``)::

    {"id": "<kind>", "data": {"job_type": <the job type as the API shows it>, "bounds": {…} | null,
                              "deadline_s": <seconds the service has>}}

Answer: a JSON object with ``"result"`` (any JSON value: the output is its canonical JSON) and optionally
``"units"`` (usage units, a non-negative integer; default 1), or with ``"error"`` (text, or ``{"code", "message"}``)
which fails the job as ``adapter_error``. A status outside 200..299, a body that is not strict JSON or has neither
member is ``upstream_error``; a body over ``max_response_bytes`` is ``response_too_large``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.jobspec import JobType, ResourceBounds
from cowboy_protocol.types.jobspec_json import _job_type_json  # the API's job_type JSON (docs/api.md)
from cowboy_protocol.types.runner import JOB_KIND_NAMES
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner.executors.base import ExecutionResult, ExecutorError, canonical_json, check_output_size
from cowboy_runner.executors.http import read_limited, with_operator_limit


@dataclass(frozen=True)
class AdapterConfig:
    """One external adapter: the job kinds it serves and where its service listens."""

    url: str
    """The service's endpoint (``http://`` or ``https://``), operator-chosen (private addresses allowed)."""
    kinds: tuple[str, ...]
    """Job kinds (``capabilities.job_types`` names) sent to this service."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra request headers (authentication)."""
    timeout_s: float = 60.0
    """Operator limit per job: the deadline is ``min(job deadline, timeout_s)``."""
    max_response_bytes: int = 1 << 20
    """Largest answer read."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(self.kinds))
        unknown = [k for k in self.kinds if k not in JOB_KIND_NAMES.values()]
        if not self.kinds or unknown:
            raise ValueError(f"adapter kinds must be job types ({', '.join(sorted(JOB_KIND_NAMES.values()))}), "
                             f"got {list(self.kinds)!r}")


def _bounds_json(bounds: ResourceBounds | None) -> dict[str, int] | None:
    if bounds is None:
        return None
    return {"max_input_tokens": bounds.max_input_tokens, "max_output_tokens": bounds.max_output_tokens,
            "max_wall_time_seconds": bounds.max_wall_time_seconds, "max_memory_mb": bounds.max_memory_mb,
            "max_retries": bounds.max_retries}


class ExternalAdapterExecutor:
    """POSTs jobs to an operator's service (module docstring)."""

    def __init__(self, name: str, config: AdapterConfig, *, max_output_bytes: int) -> None:
        self.name = name
        """Adapter name (``[executors.adapters.<name>]``)."""
        self.config = config
        """Settings."""
        self.max_output_bytes = max_output_bytes
        """Largest result returned."""

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Send the job and turn the answer into a result within the deadline."""
        kind = JOB_KIND_NAMES.get(type(job).KIND, "")
        if kind not in self.config.kinds:
            raise ExecutorError("unsupported_job_type", f"adapter {self.name!r} does not serve {kind or 'this'} jobs")
        body = {"id": kind, "data": {"job_type": _job_type_json(job), "bounds": _bounds_json(bounds),
                                     "deadline_s": min(deadline_s, self.config.timeout_s)}}
        return await with_operator_limit(self._post(body), deadline_s, self.config.timeout_s,
                                         f"executors.adapters.{self.name}.timeout_s")

    async def _post(self, body: dict[str, Any]) -> ExecutionResult:
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.config.headers}
        try:
            async with aiohttp.ClientSession() as s, \
                    s.post(self.config.url, data=json.dumps(body).encode(), headers=headers) as resp:
                raw = await read_limited(resp, self.config.max_response_bytes)
                status = resp.status
        except aiohttp.ClientError as e:
            raise ExecutorError("upstream_error", f"adapter {self.name!r}: {e}") from None
        if not 200 <= status < 300:
            raise ExecutorError("upstream_error", f"adapter {self.name!r} answered HTTP {status}: {raw[:200]!r}",
                                detail={"status": status})
        try:
            answer = parse_json(raw)
        except ValidationError as e:
            raise ExecutorError("upstream_error", f"adapter {self.name!r} answer is not JSON: {e.message}") from None
        if not isinstance(answer, dict) or ("result" not in answer and "error" not in answer):
            raise ExecutorError("upstream_error", f"adapter {self.name!r} answer has neither result nor error")
        if "error" in answer and answer["error"] is not None:
            err = answer["error"]
            text = err if isinstance(err, str) else json.dumps(err, sort_keys=True)
            raise ExecutorError("adapter_error", f"adapter {self.name!r}: {text[:300]}", detail={"error": err})
        units = answer.get("units", 1)
        if isinstance(units, bool) or not isinstance(units, int) or units < 0:
            raise ExecutorError("upstream_error", f"adapter {self.name!r}: units must be a non-negative integer")
        output = check_output_size(canonical_json(answer["result"]), self.max_output_bytes)
        return ExecutionResult(output, units, {"adapter": self.name, "status": status})
