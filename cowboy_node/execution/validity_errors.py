"""Execution errors.

``TxInvalid``: a transaction that must not be included at all (bad nonce,
fee below basefee, cannot afford its maximum fee...). A block containing one is
invalid. ``TxFailed`` is raised inside execution for a transaction that is
included but fails (it is charged and gets a failed receipt). ``InvalidBlock``
rejects a whole block with the field that mismatched.
"""

from __future__ import annotations

from cowboy_protocol.types.validation_errors import ValidationError


class TxInvalid(ValidationError):
    """Transaction cannot be included; ``code`` is the stable RPC error code."""


class TxFailed(Exception):
    """Included transaction failed; its writes are reverted and it is charged."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message or code)
        self.code = code


class InvalidBlock(ValidationError):
    """A block does not follow the rules; ``code`` names the rule."""
