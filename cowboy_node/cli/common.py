"""What every ``cowboy-node`` client command module shares: exit codes, argument types, output, the RPC client,
the exception-to-exit-code wrapper (:func:`cli_command`), the receipt wait and the ``--rpc`` flag.

The command groups (``client_commands``, ``actor_commands``, ``job_commands``, ``runner_commands``,
``governance_commands``, ``workflow_commands``, ``verify_commands``, ``watch_command``) import these names; the
tx submission helpers (``submit``, ``report``, ``add_tx_flags``, ...) stay in :mod:`cowboy_node.cli.client_commands`.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TypeAlias

from cowboy_node.cli import hints
from cowboy_protocol import api_types as api
from cowboy_protocol.crypto.address import parse_address, to_checksum_address
from cowboy_protocol.http_client import DEFAULT_RPC_URL, ApiError, NodeUnreachable, RpcClient, normalize_url
from cowboy_protocol.keys import load_account_private_key

EXIT_OK = 0
EXIT_ERROR = 1
"""The node answered with an error, could not be reached, or the receipt wait timed out."""
EXIT_USAGE = 2
EXIT_TX_FAILED = 3
"""The transaction was included with a failed receipt (it was charged), or a dry run failed."""
POLL_INTERVAL_S = 0.2
U64_MAX = 2**64 - 1
U128_MAX = 2**128 - 1
MAX_CHAIN_ID_BYTES = 64
OFFLINE_FLAGS = (("nonce", "--nonce"), ("chain_id", "--chain-id"), ("max_fee_per_cycle", "--max-fee-per-cycle"),
                 ("max_fee_per_cell", "--max-fee-per-cell"))
"""``(dest, flag)`` of the values every ``tx`` command otherwise fetches from the node."""


_HASH_RE = re.compile(r"(?:0x)?[0-9a-fA-F]{64}")
_DECIMAL_RE = re.compile(r"[0-9]+")

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """Bad user input detected after argument parsing (exit code 2)."""


class SignedOnly(Exception):
    """``--sign-only`` printed the signed transactions; the command ends here with exit code 0."""


# -- argument types --------------------------------------------------------------------
def uint_arg(max_value: int, what: str) -> Callable[[str], int]:
    """An argparse ``type``: a decimal integer in ``0..max_value`` (``what`` names the bound in the error)."""
    def parse(text: str) -> int:
        t = text.strip()
        if _DECIMAL_RE.fullmatch(t) is None:
            raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
        v = int(t)
        if v > max_value:
            raise argparse.ArgumentTypeError(f"must be at most {max_value} ({what}), got {text}")
        return v
    return parse


def address_arg(text: str) -> bytes:
    """An argparse ``type``: a 20-byte account address (0x-hex, EIP-55 checked when mixed case)."""
    try:
        return parse_address(text.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"invalid address: {e}") from None


def tx_hash_arg(text: str) -> str:
    """An argparse ``type``: a 32-byte hash, returned as lower-case ``0x``-hex."""
    t = text.strip()
    if _HASH_RE.fullmatch(t) is None:
        raise argparse.ArgumentTypeError(f"expected 0x followed by 64 hex digits, got {text!r}")
    return "0x" + t.removeprefix("0x").lower()


def chain_id_arg(text: str) -> str:
    """An argparse ``type``: a chain id of 1..:data:`MAX_CHAIN_ID_BYTES` UTF-8 bytes."""
    try:
        n = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        n = 0
    if not 0 < n <= MAX_CHAIN_ID_BYTES:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_CHAIN_ID_BYTES} UTF-8 bytes, got {text!r}")
    return text


def rpc_url_arg(text: str) -> str:
    """An argparse ``type``: the node's HTTP API base URL, normalised."""
    try:
        return normalize_url(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_seconds_arg(text: str) -> float:
    """An argparse ``type``: a finite positive number of seconds."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return v


# -- output helpers --------------------------------------------------------------------
def print_json(doc: Any) -> None:
    """A command's result on stdout (indented JSON)."""
    print(json.dumps(doc, indent=2))


def print_error(message: str) -> None:
    """``error: <message>`` on stderr."""
    print(f"error: {message}", file=sys.stderr)


def print_hint(text: str | None) -> None:
    """``hint: <text>`` on stderr (nothing for ``None``)."""
    if text:
        print(f"hint: {text}", file=sys.stderr)


def _sender_of(args: argparse.Namespace) -> str | None:
    """The address of ``--key`` for a hint (None when there is no readable key)."""
    path = getattr(args, "key", None)
    if not isinstance(path, str):
        return None
    try:
        return to_checksum_address(load_account_private_key(path)[1])
    except Exception:  # a hint must never replace the error it follows
        return None


def cli_command(fn: Command) -> Command:
    """Decorates a command: client exceptions become an ``error:`` line (and a hint) and an exit code."""
    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ApiError as e:
            print_error(f"{e.code}: {e.message}")
            print_hint(hints.error_hint(e.code, e.message, sender=_sender_of(args)))
            return 1
        except NodeUnreachable as e:
            missing = offline_flags_missing(args) if getattr(args, "sign_only", False) else []
            hint = f"; to sign offline also give {', '.join(missing)}" if missing else ""
            print_error(f"{e}{hint}")
            print_hint(None if missing else hints.unreachable_hint(e.url))  # offline signing has its own advice
            return 1
        except UsageError as e:
            print_error(str(e))
            return 2
        except SignedOnly:
            return 0
    return wrapper


def offline_flags_missing(args: argparse.Namespace) -> list[str]:
    """The flags whose absence makes a ``tx`` command ask the node (the standard four and the command's
    ``extra_offline_flags``)."""
    flags = [*OFFLINE_FLAGS, *getattr(args, "extra_offline_flags", ())]
    return [flag for dest, flag in flags if getattr(args, dest, None) is None]


def rpc_client(args: argparse.Namespace) -> RpcClient:
    """The HTTP API client of ``--rpc``."""
    return RpcClient(args.rpc)



def wait_for_receipt(client: RpcClient, tx_hash: str, timeout: float) -> api.Receipt | None:
    """Poll the node for ``tx_hash``'s receipt for up to ``timeout`` seconds (``None`` when none came)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            receipt = client.receipt(tx_hash)
        except ApiError as e:
            if e.status != 404:
                raise
        else:
            if isinstance(receipt, dict):
                return receipt
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(POLL_INTERVAL_S, remaining))



# -- registration --------------------------------------------------------------------
def add_rpc_flag(p: argparse.ArgumentParser) -> None:
    """``--rpc`` (default :data:`~cowboy_protocol.http_client.DEFAULT_RPC_URL`)."""
    p.add_argument("--rpc", type=rpc_url_arg, default=DEFAULT_RPC_URL,
                   help=f"node HTTP API base URL (default {DEFAULT_RPC_URL})")


