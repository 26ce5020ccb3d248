"""Where in the actor's source a run stopped: the line number that goes into receipt messages.

Actor code is compiled with the file name ``<actor>`` (``sandbox.compile_actor``), so the innermost
traceback entry with that name is the actor's own line; the node's frames (host calls, PVM guards)
are skipped. Line numbers come from the actor's source positions (instrumentation copies them onto
the nodes it inserts), not from the interpreter, so every node reports the same line.
"""

from __future__ import annotations

from types import TracebackType

ACTOR_FILENAME = "<actor>"
"""``co_filename`` of compiled actor code."""


def actor_line(tb: TracebackType | None) -> int | None:
    """1-based source line of the innermost actor frame in ``tb``, or None if no actor code was running."""
    line: int | None = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == ACTOR_FILENAME and tb.tb_lineno is not None:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def at_line(message: str, tb: TracebackType | None) -> str:
    """``message`` followed by `` at line N`` when the traceback shows an actor line."""
    line = actor_line(tb)
    return message if line is None else f"{message} at line {line}"
