"""PVM errors: deploy-time rejection, run-time halts, and the internal halt signal."""

from __future__ import annotations

#: Stable run-time codes of :class:`PvmError`.
HALT_CODES = (
    "out_of_cycles",
    "recursion_limit",
    "memory_limit",
    "int_too_large",
    "payload_too_large",
    "no_such_handler",
    "handler_error",
    "bad_return_type",
    "forbidden",
)


class ActorRejected(ValueError):
    """The actor source was refused at deploy time.

    ``line`` is the 1-based source line (0 when the whole source is at fault),
    ``rule`` a stable rule name (see ``docs/pvm.md``), ``message`` a human text.
    """

    def __init__(self, line: int, rule: str, message: str) -> None:
        super().__init__(f"line {line}: [{rule}] {message}")
        self.line = line
        self.rule = rule
        self.message = message


class PvmError(Exception):
    """A handler call halted; ``code`` is one of :data:`HALT_CODES`.

    A host function that raises ``TxFailed`` (for instance ``out_of_cells``) halts
    the actor too; its code is carried through unchanged.
    """

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


class PvmHalt(BaseException):
    """Raised inside the sandbox to stop the actor.

    It derives from ``BaseException`` and the policy only lets actors catch
    ``Exception`` subclasses, so actor code can never swallow it.
    """

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
