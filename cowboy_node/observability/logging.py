"""Structured logging (structlog on top of the standard library), to stdout.

``configure_logging("json")`` emits one JSON object per line with ``timestamp``
(ISO 8601, UTC), ``level``, ``logger`` and ``event`` plus the bound key/values;
``"console"`` renders the same records for humans. Records of third-party
libraries that use the standard ``logging`` module (aiohttp, aioquic, ...) go
through the same renderer and level. aiohttp's per-request access log is only
shown at level ``debug``.

Before ``configure_logging`` is called, loggers from :func:`get_logger` use
structlog's defaults (console output), so importing a module never configures
anything.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
import structlog.tracebacks

LOG_FORMATS = ("console", "json")
LOG_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_HANDLER_MARK = "_cowboy_handler"
_QUIET_UNLESS_DEBUG = ("aiohttp.access", "quic")
"""Loggers that only speak at debug level: per-request access lines, aioquic's per-connection chatter."""


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stdout`` is at emit time (follows redirections and test capture)."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def configure_logging(fmt: str = "console", level: str = "info") -> None:
    """Route structlog and standard-library logging to stdout in ``fmt`` at ``level``.

    ``fmt`` is ``"console"`` or ``"json"``; ``level`` is ``debug``, ``info``, ``warning`` or ``error``
    (the ``[log]`` section of config.toml). Raises ``ValueError`` naming ``log.format`` / ``log.level``.
    Calling it again replaces the previous configuration (never duplicates output).
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log.format: expected one of {list(LOG_FORMATS)}, got {fmt!r}")
    if level not in LOG_LEVELS:
        raise ValueError(f"log.level: expected one of {list(LOG_LEVELS)}, got {level!r}")

    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    render: list[Any]
    if fmt == "json":
        # Tracebacks as structured data, without frame locals (they could hold key material).
        tracebacks = structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False, use_rich=False))
        render = [tracebacks, structlog.processors.JSONRenderer()]
    else:
        render = [structlog.dev.ConsoleRenderer(colors=_stdout_is_tty(),
                                                exception_formatter=structlog.dev.plain_traceback)]

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached, so that module-level loggers follow a later reconfiguration.
        cache_logger_on_first_use=False,
    )
    handler = _StdoutHandler()
    setattr(handler, _HANDLER_MARK, True)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render],
    ))
    root = logging.getLogger()
    _remove_our_handlers(root)
    root.addHandler(handler)
    root.setLevel(LOG_LEVELS[level])
    for name in _QUIET_UNLESS_DEBUG:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "debug" else logging.WARNING)


def reset_logging() -> None:
    """Undo :func:`configure_logging` (structlog defaults, root logger back to WARNING). For tests."""
    root = logging.getLogger()
    _remove_our_handlers(root)
    root.setLevel(logging.WARNING)
    for name in _QUIET_UNLESS_DEBUG:
        logging.getLogger(name).setLevel(logging.NOTSET)
    structlog.reset_defaults()


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A logger named ``name`` (e.g. ``"cowboy.node"``); safe to create at import time."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger


def _remove_our_handlers(root: logging.Logger) -> None:
    for h in list(root.handlers):
        if getattr(h, _HANDLER_MARK, False):
            root.removeHandler(h)
            h.close()


def _stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False
