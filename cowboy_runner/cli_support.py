"""Helpers shared by the ``cowboy-runner`` subcommands (cowboy_runner/cli.py and its command modules): exit codes,
:class:`CliError`, loading a home, the live-daemon check, and submitting a transaction and waiting for its receipt.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cowboy_protocol import api_types as api
from cowboy_protocol.http_client import ApiError, RpcClient
from cowboy_protocol.types.transaction import Transaction
from cowboy_runner.config import ConfigError, RunnerSettings, load_settings
from cowboy_runner.keyfile import RunnerKey, load_key
from cowboy_runner.status import is_running, read_pid, read_status
from cowboy_runner.txbuild import Fees

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_NOT_RUNNING, EXIT_VALIDATOR, EXIT_CHAIN = 0, 1, 2, 3, 4, 5


class CliError(Exception):
    """A failure with its exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _load(home: str) -> tuple[RunnerSettings, RunnerKey]:
    try:
        settings = load_settings(home)
        key = load_key(settings.key_file)
    except ConfigError as e:
        raise CliError(str(e), EXIT_CONFIG) from None
    except (OSError, ValueError) as e:  # KeyFileError and key decoding problems
        raise CliError(f"runner.key_file: {e}", EXIT_CONFIG) from None
    return settings, key


def _state_dir(home: str) -> Path:
    try:
        return load_settings(home).journal_path.parent
    except ConfigError as e:
        raise CliError(str(e), EXIT_CONFIG) from None


def _live_daemon(directory: Path) -> int | None:
    """Pid of this home's running daemon, or None.

    A pid file alone is not enough: after a crash the pid may belong to an unrelated process by now, and
    signalling it (SIGUSR1 terminates most programs) would be harmful. The daemon counts as running only when
    its pid is alive and its ``status.json`` names that pid and is fresh (:func:`~cowboy_runner.status.is_running`).
    """

    pid = read_pid(directory)
    if pid is None or not is_running(directory, read_status(directory)):
        return None
    return pid


def _submit_and_wait(rpc: RpcClient, tx: Transaction, timeout_s: float) -> api.Receipt:
    rpc.submit(tx.to_bytes())
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return rpc.receipt(tx.tx_hash())
        except ApiError as e:
            if e.status != 404:
                raise
        time.sleep(0.2)
    raise CliError(f"transaction 0x{tx.tx_hash().hex()} not included within {timeout_s:g} s", EXIT_CHAIN)


def _fees(status: Mapping[str, Any], settings: RunnerSettings) -> Fees:
    f = settings.fees
    return Fees.from_basefees(int(status["basefee"]["cycle"]), int(status["basefee"]["cell"]),
                              multiplier=f.max_fee_multiplier, priority_fee_per_cycle=f.priority_fee_per_cycle,
                              priority_fee_per_cell=f.priority_fee_per_cell)
