"""Start-up errors that name the file, the key and what was expected."""

from __future__ import annotations


class ConfigError(Exception):
    """Invalid configuration, genesis or data directory; the message is shown to the operator as-is."""

    def __init__(self, path: str, key: str | None, message: str) -> None:
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.key = key
