"""Typed validation errors for wire and state data.

Every error carries a stable machine-readable ``code`` (the RPC returns it as
JSON) and a human message naming the offending field.
"""

from __future__ import annotations


class ValidationError(ValueError):
    """A value failed structural validation; ``code`` is stable, ``field`` names the culprit."""

    def __init__(self, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field


class DecodeError(ValidationError):
    """Bytes do not decode to a well-formed value of the expected schema."""

    def __init__(self, message: str, *, field: str | None = None, code: str = "malformed") -> None:
        super().__init__(code, message, field=field)
