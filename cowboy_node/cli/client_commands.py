"""Client subcommands of ``cowboy-node``: status, keys, tx transfer, query (actor commands: actor_commands.py).

They talk to a running node over its HTTP API (``--rpc``, default
``http://127.0.0.1:4000``) and print JSON (``status`` prints a summary unless
``--json``).

Exit codes: 0 success; 1 the node answered with an error, could not be
reached, or ``--wait`` timed out; 2 bad user input (argparse errors, a bad
address/hash/amount, an unreadable or invalid key file). API errors are
printed to stderr as ``error: <code>: <message>``.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from cowboy_node.cli.client import DEFAULT_RPC_URL, ApiError, NodeUnreachable, RpcClient, normalize_url

DEFAULT_CYCLES_LIMIT = 50_000
DEFAULT_CELLS_LIMIT = 2_000
DEFAULT_PRIORITY_FEE = 1_000
"""Default tip per cycle and per cell (capped at the max fee per unit)."""
DEFAULT_WAIT_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.2
U64_MAX = 2**64 - 1
U128_MAX = 2**128 - 1

_HASH_RE = re.compile(r"(?:0x)?[0-9a-fA-F]{64}")
_DECIMAL_RE = re.compile(r"[0-9]+")

Command = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """Bad user input detected after argument parsing (exit code 2)."""


# -- argument types --------------------------------------------------------------------
def _uint(max_value: int, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        t = text.strip()
        if _DECIMAL_RE.fullmatch(t) is None:
            raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
        v = int(t)
        if v > max_value:
            raise argparse.ArgumentTypeError(f"must be at most {max_value} ({what}), got {text}")
        return v
    return parse


def _address(text: str) -> bytes:
    from cowboy_node.crypto.address import parse_address

    try:
        return parse_address(text.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"invalid address: {e}") from None


def _tx_hash(text: str) -> str:
    t = text.strip()
    if _HASH_RE.fullmatch(t) is None:
        raise argparse.ArgumentTypeError(f"expected 0x followed by 64 hex digits, got {text!r}")
    return "0x" + t.removeprefix("0x").lower()


def _rpc_url(text: str) -> str:
    try:
        return normalize_url(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return v


# -- output helpers --------------------------------------------------------------------
def _print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2))


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def _run(fn: Command) -> Command:
    """Map client exceptions to messages and exit codes."""
    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ApiError as e:
            _error(f"{e.code}: {e.message}")
            return 1
        except NodeUnreachable as e:
            _error(str(e))
            return 1
        except UsageError as e:
            _error(str(e))
            return 2
    return wrapper


def _client(args: argparse.Namespace) -> RpcClient:
    return RpcClient(args.rpc)


# -- status --------------------------------------------------------------------------
def _status_summary(st: dict[str, Any]) -> str:
    basefee = st.get("basefee") or {}
    mempool = st.get("mempool") or {}
    lines = [
        f"chain id:    {st.get('chain_id')}",
        f"height:      {st.get('height')}",
        f"head hash:   {st.get('hash')}",
        f"state root:  {st.get('state_root')}",
        f"basefees:    cycle {basefee.get('cycle')}, cell {basefee.get('cell')}",
        f"mempool:     {mempool.get('txs')} txs ({mempool.get('bytes')} bytes)",
    ]
    return "\n".join(lines)


@_run
def cmd_status(args: argparse.Namespace) -> int:
    """Print the node's status."""
    st = _client(args).get_json("/status")
    if args.json:
        _print_json(st)
    else:
        print(_status_summary(st if isinstance(st, dict) else {}))
    return 0


# -- keys ----------------------------------------------------------------------------
@_run
def cmd_keys_new(args: argparse.Namespace) -> int:
    """Generate an account key file."""
    from cowboy_node.chain.keys import new_account_key
    from cowboy_node.crypto.address import to_checksum_address

    try:
        address = new_account_key(args.out)
    except FileExistsError as e:
        _error(str(e))
        return 1
    except OSError as e:
        _error(f"cannot write key file {args.out}: {e.strerror or e}")
        return 1
    _print_json({"address": to_checksum_address(address), "file": str(args.out)})
    return 0


@_run
def cmd_keys_show(args: argparse.Namespace) -> int:
    """Print the address of an account key file (never the private key)."""
    from cowboy_node.chain.keys import KeyFileError, load_account_key
    from cowboy_node.crypto.address import to_checksum_address

    try:
        address = load_account_key(args.file)
    except KeyFileError as e:
        raise UsageError(str(e)) from None
    print(to_checksum_address(address))
    return 0


# -- tx transfer ---------------------------------------------------------------------
def _basefees(status: Any) -> tuple[str, int, int]:
    if not isinstance(status, dict):
        raise ApiError("invalid_response", "/status did not return a JSON object", 200)
    chain_id = status.get("chain_id")
    basefee = status.get("basefee")
    if not isinstance(chain_id, str) or not isinstance(basefee, dict):
        raise ApiError("invalid_response", "/status is missing chain_id or basefee", 200)
    cycle, cell = basefee.get("cycle"), basefee.get("cell")
    if not (isinstance(cycle, int) and isinstance(cell, int)) or isinstance(cycle, bool) or isinstance(cell, bool) \
            or cycle < 0 or cell < 0:
        raise ApiError("invalid_response", "/status basefee.cycle / basefee.cell are not non-negative integers", 200)
    return chain_id, cycle, cell


def _fees(explicit_max: int | None, explicit_tip: int | None, basefee: int, max_flag: str,
          tip_flag: str) -> tuple[int, int]:
    max_fee = explicit_max if explicit_max is not None else min(2 * basefee, U64_MAX)
    if explicit_tip is not None:
        if explicit_tip > max_fee:
            raise UsageError(f"{tip_flag} ({explicit_tip}) must not exceed {max_flag} ({max_fee})")
        tip = explicit_tip
    else:
        tip = min(DEFAULT_PRIORITY_FEE, max_fee)
    return max_fee, tip


def _wait_for_receipt(client: RpcClient, tx_hash: str, timeout: float) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            receipt = client.get_json(f"/tx/{tx_hash}/receipt")
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


def load_key(args: argparse.Namespace) -> tuple[bytes, bytes]:
    """``(private key, address)`` from ``--key``; a bad file is a usage error (exit 2)."""
    from cowboy_node.chain.keys import KeyFileError, load_account_private_key

    try:
        return load_account_private_key(args.key)
    except KeyFileError as e:
        raise UsageError(f"--key: {e}") from None


def submit(args: argparse.Namespace, client: RpcClient, sk: bytes, sender: bytes, instruction: Any) -> str:
    """Build, sign and submit ``instruction`` with the fee/limit flags of ``args``; returns the tx hash.

    The chain id and basefees come from ``/status``, the nonce from ``next_pending_nonce``.
    """
    from cowboy_node.crypto.address import to_checksum_address
    from cowboy_node.types.transaction import Transaction

    chain_id, cycle_bf, cell_bf = _basefees(client.get_json("/status"))
    max_cycle, tip_cycle = _fees(args.max_fee_per_cycle, args.priority_fee_per_cycle, cycle_bf,
                                 "--max-fee-per-cycle", "--priority-fee-per-cycle")
    max_cell, tip_cell = _fees(args.max_fee_per_cell, args.priority_fee_per_cell, cell_bf,
                               "--max-fee-per-cell", "--priority-fee-per-cell")
    account = client.get_json(f"/account/{to_checksum_address(sender)}")
    nonce = account.get("next_pending_nonce") if isinstance(account, dict) else None
    if not isinstance(nonce, int) or isinstance(nonce, bool) or nonce < 0:
        raise ApiError("invalid_response", "/account response has no valid next_pending_nonce", 200)
    tx = Transaction(
        chain_id=chain_id, nonce=nonce, sender=sender, instruction=instruction,
        cycles_limit=args.cycles_limit, cells_limit=args.cells_limit,
        max_fee_per_cycle=max_cycle, max_priority_fee_per_cycle=tip_cycle,
        max_fee_per_cell=max_cell, max_priority_fee_per_cell=tip_cell,
    ).signed(sk)
    local_hash = "0x" + tx.tx_hash().hex()
    result = client.post_tx(tx.to_bytes())
    returned = result.get("tx_hash")
    return returned if isinstance(returned, str) else local_hash


def report(client: RpcClient, tx_hash: str, *, wait: bool, timeout: float, extra: dict[str, Any] | None = None,
           from_receipt: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    """Print ``{**extra, "tx_hash"}``, or after waiting ``{..., "height", "receipt"}`` plus what
    ``from_receipt`` derives from the receipt; returns the exit code."""
    head = {**(extra or {}), "tx_hash": tx_hash}
    if not wait:
        _print_json(head)
        return 0
    receipt = _wait_for_receipt(client, tx_hash, timeout)
    if receipt is None:
        message = f"no receipt for {tx_hash} after {timeout:g} s"
        _print_json({**head, "error": {"code": "timeout", "message": message}})
        _error(f"timeout: {message}")
        return 1
    derived = from_receipt(receipt) if from_receipt is not None else {}
    _print_json({**head, "height": receipt.get("height"), "receipt": receipt, **derived})
    return 0


@_run
def cmd_tx_transfer(args: argparse.Namespace) -> int:
    """Build, sign and submit a Transfer; optionally wait for its receipt."""
    from cowboy_node.types.instructions import Transfer

    sk, sender = load_key(args)
    client = _client(args)
    tx_hash = submit(args, client, sk, sender, Transfer(to=args.to, amount=args.amount))
    return report(client, tx_hash, wait=args.wait, timeout=args.timeout)


# -- query ---------------------------------------------------------------------------
@_run
def cmd_query_account(args: argparse.Namespace) -> int:
    """Print an account's balance and nonces."""
    from cowboy_node.crypto.address import to_checksum_address

    _print_json(_client(args).get_json(f"/account/{to_checksum_address(args.address)}"))
    return 0


@_run
def cmd_query_block(args: argparse.Namespace) -> int:
    """Print a block header and its transaction hashes."""
    _print_json(_client(args).get_json(f"/block/{args.height}"))
    return 0


@_run
def cmd_query_tx(args: argparse.Namespace) -> int:
    """Print a transaction, with its receipt when committed."""
    client = _client(args)
    tx = client.get_json(f"/tx/{args.hash}")
    receipt: Any = None
    try:
        receipt = client.get_json(f"/tx/{args.hash}/receipt")
    except ApiError as e:
        if e.status != 404:
            raise
    if isinstance(tx, dict):
        tx = {**tx, "receipt": receipt}
    _print_json(tx)
    return 0


# -- registration --------------------------------------------------------------------
def _add_rpc(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rpc", type=_rpc_url, default=DEFAULT_RPC_URL,
                   help=f"node HTTP API base URL (default {DEFAULT_RPC_URL})")


def add_tx_flags(p: argparse.ArgumentParser, *, wait_flag: bool, cycles_limit: int = DEFAULT_CYCLES_LIMIT,
                 cells_limit: int | None = DEFAULT_CELLS_LIMIT, cells_help: str | None = None) -> None:
    """``--rpc``, ``--wait``/``--timeout`` and the limit and fee flags shared by every ``tx`` command.

    ``cells_limit=None`` leaves the default to the command (it depends on what it carries).
    """
    _add_rpc(p)
    if wait_flag:
        p.add_argument("--wait", action="store_true", help="wait for the receipt")
    p.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_WAIT_TIMEOUT_S, metavar="S",
                   help=f"receipt wait timeout in seconds (default {DEFAULT_WAIT_TIMEOUT_S:g})")
    u64 = _uint(U64_MAX, "u64")
    p.add_argument("--cycles-limit", type=u64, default=cycles_limit, metavar="N", help=f"default {cycles_limit}")
    p.add_argument("--cells-limit", type=u64, default=cells_limit, metavar="N",
                   help=cells_help or f"default {cells_limit}")
    p.add_argument("--max-fee-per-cycle", type=u64, default=None, metavar="N",
                   help="default 2 × the current cycle basefee")
    p.add_argument("--priority-fee-per-cycle", type=u64, default=None, metavar="N",
                   help=f"default {DEFAULT_PRIORITY_FEE} (capped at the max fee)")
    p.add_argument("--max-fee-per-cell", type=u64, default=None, metavar="N",
                   help="default 2 × the current cell basefee")
    p.add_argument("--priority-fee-per-cell", type=u64, default=None, metavar="N",
                   help=f"default {DEFAULT_PRIORITY_FEE} (capped at the max fee)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client subcommands (status, keys, tx, query) to ``subparsers``."""
    st = subparsers.add_parser("status", help="show the node's chain status")
    _add_rpc(st)
    st.add_argument("--json", action="store_true", help="print the raw /status JSON")
    st.set_defaults(func=cmd_status)

    keys = subparsers.add_parser("keys", help="account key files")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    kn = keys_sub.add_parser("new", help="generate a new account key file (mode 0600)")
    kn.add_argument("--out", required=True, metavar="FILE", help="where to write the key (must not exist)")
    kn.set_defaults(func=cmd_keys_new)
    ks = keys_sub.add_parser("show", help="print the address of an account key file")
    ks.add_argument("file", metavar="FILE")
    ks.set_defaults(func=cmd_keys_show)

    tx = subparsers.add_parser("tx", help="build, sign and submit transactions")
    tx_sub = tx.add_subparsers(dest="tx_command", required=True)
    tt = tx_sub.add_parser("transfer", help="transfer native tokens")
    tt.add_argument("--key", required=True, metavar="FILE", help="sender's account key file")
    tt.add_argument("--to", required=True, type=_address, metavar="ADDRESS", help="recipient (0x + 40 hex)")
    tt.add_argument("--amount", required=True, type=_uint(U128_MAX, "u128"), metavar="N",
                    help="amount in the smallest unit")
    add_tx_flags(tt, wait_flag=True)
    tt.set_defaults(func=cmd_tx_transfer)

    # actor_commands imports this module's helpers, so it is imported here, not at the top.
    from cowboy_node.cli.actor_commands import register_query, register_tx
    from cowboy_node.cli.job_commands import register_query as register_job_query
    from cowboy_node.cli.job_commands import register_tx as register_job_tx
    from cowboy_node.cli.runner_commands import register_query as register_runner_query
    from cowboy_node.cli.runner_commands import register_tx as register_runner_tx

    register_tx(tx_sub)
    register_runner_tx(tx_sub)
    register_job_tx(tx_sub)

    q = subparsers.add_parser("query", help="read chain data from the node")
    q_sub = q.add_subparsers(dest="query_command", required=True)
    qa = q_sub.add_parser("account", help="balance and nonces of an account")
    qa.add_argument("address", type=_address, metavar="ADDRESS")
    _add_rpc(qa)
    qa.set_defaults(func=cmd_query_account)
    qb = q_sub.add_parser("block", help="a block header and its transaction hashes")
    qb.add_argument("height", type=_uint(U64_MAX, "u64"), metavar="HEIGHT")
    _add_rpc(qb)
    qb.set_defaults(func=cmd_query_block)
    qt = q_sub.add_parser("tx", help="a transaction and its receipt")
    qt.add_argument("hash", type=_tx_hash, metavar="HASH")
    _add_rpc(qt)
    qt.set_defaults(func=cmd_query_tx)
    register_query(q_sub)
    register_runner_query(q_sub)
    register_job_query(q_sub)
