"""Error results: what a runner reveals when its execution failed (docs/jobs.md "Error results").

A runner whose executor fails (HTTP error, timeout, crash of a custom program, schema violation…) does not go
silent: it reveals an *error result* through the same commit/reveal path as any result, so the job settles
as failed with a typed reason instead of timing out. The result bytes are an envelope no executor output can
be mistaken for::

    error_result = ERROR_RESULT_MAGIC ‖ canonical CBOR {0: code text, 1: detail text}
    ERROR_RESULT_MAGIC = 00 "cowboy-job-error-v1" 00        (21 bytes, project choice)

``code`` is a stable snake_case reason (``[a-z][a-z0-9_]*``, at most 64 bytes), ``detail`` operator-facing
text (at most 512 UTF-8 bytes; may be empty). The runner reports an executor output that itself starts with
the magic as the error ``reserved_output``, so every result starting with the magic is an error result, and an
honest runner never reveals a malformed one. Both daemons use this one definition: the runner builds the
envelope (:func:`error_result_for`), the Result Verifier decodes it (:func:`decode_error_result`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.validation_errors import DecodeError

ERROR_RESULT_MAGIC = b"\x00cowboy-job-error-v1\x00"
"""Prefix of every error result (a NUL cannot start a JSON or UTF-8 text result)."""
MAX_ERROR_CODE_BYTES = 64
"""Longest error code."""
MAX_ERROR_DETAIL_BYTES = 512
"""Longest error detail (UTF-8 bytes)."""
RESERVED_OUTPUT = "reserved_output"
"""Error code for an executor output that starts with :data:`ERROR_RESULT_MAGIC`."""
INTERNAL = "internal"
"""Error code for an executor that crashed (an unexpected exception in the runner)."""
_CODE = re.compile(r"[a-z][a-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class ErrorResult:
    """A decoded error result."""

    code: str
    """Stable snake_case reason (the executor's failure code, docs/runner-executors.md)."""
    detail: str = ""
    """Operator-facing explanation (never parsed by the chain)."""

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or not _CODE.match(self.code) \
                or len(self.code.encode()) > MAX_ERROR_CODE_BYTES:
            raise DecodeError(f"error code must match [a-z][a-z0-9_]* and be at most {MAX_ERROR_CODE_BYTES} bytes",
                              field="code")
        if not isinstance(self.detail, str) or len(self.detail.encode("utf-8", "surrogatepass"))\
                > MAX_ERROR_DETAIL_BYTES:
            raise DecodeError(f"error detail must be text of at most {MAX_ERROR_DETAIL_BYTES} bytes", field="detail")

    def encode(self) -> bytes:
        """The envelope bytes (the ``result`` of the runner's JobResultCommit/JobResultSubmit)."""
        return ERROR_RESULT_MAGIC + encode({0: self.code, 1: self.detail})


def is_error_result(result: bytes) -> bool:
    """True iff ``result`` starts with :data:`ERROR_RESULT_MAGIC` (well-formed or not)."""
    return result.startswith(ERROR_RESULT_MAGIC)


def decode_error_result(result: bytes) -> ErrorResult | None:
    """The error result in ``result``; None when it is an ordinary result (no magic).

    Raises ``DecodeError`` for bytes that start with the magic but are not exactly a canonical envelope.
    """
    if not is_error_result(result):
        return None
    try:
        body = decode(result[len(ERROR_RESULT_MAGIC):], max_depth=2)
    except ValueError as e:
        raise DecodeError(f"error result: {e}", field="result") from None
    if not isinstance(body, dict) or set(body) != {0, 1} or not isinstance(body[0], str) \
            or not isinstance(body[1], str):
        raise DecodeError("error result must be the map {0: code text, 1: detail text}", field="result")
    return ErrorResult(body[0], body[1])


def _clip(text: str, limit: int) -> str:
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore")


def error_result_for(code: str, detail: str = "") -> bytes:
    """The envelope for a failure: ``code`` as given when well-formed (else ``internal``), ``detail`` cut to
    :data:`MAX_ERROR_DETAIL_BYTES` at a character boundary."""
    if not isinstance(code, str) or not _CODE.match(code) or len(code) > MAX_ERROR_CODE_BYTES:
        code = INTERNAL
    return ErrorResult(code, _clip(detail, MAX_ERROR_DETAIL_BYTES)).encode()
