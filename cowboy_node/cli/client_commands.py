"""Client subcommands of ``cowboy-node``: status, keys, tx transfer, query (actor commands: actor_commands.py).

They talk to a running node over its HTTP API (``--rpc``, default
``http://127.0.0.1:4000``) and print JSON (``status`` prints a summary unless
``--json``).

Every ``tx`` command signs through :func:`submit_many`: ``--nonce`` skips the nonce
lookup, ``--chain-id`` and both ``--max-fee-per-*`` flags skip ``/status``, and
``--sign-only`` prints the signed ``tx_bytes`` (0x-hex, one line per transaction)
instead of sending them; ``tx broadcast`` sends such output later, from another
machine.

Waiting: every ``tx`` command waits for its receipt (up to ``--timeout``)
unless ``--no-wait``; ``--wait`` is accepted and changes nothing (the
former opt-in spelling). ``--sign-only`` sends nothing, so it never waits.

Exit codes (docs/api.md "Command line"): 0 success (with ``--no-wait``: the node
accepted the transaction); 1 the node answered with an error, could not be
reached, or the wait timed out; 2 bad user input (argparse errors, a bad
address/hash/amount, an unreadable or invalid key file, a bad signed
transaction given to ``tx broadcast``); 3 the transaction was included but
its receipt says it failed (or a ``--simulate``/``--gas auto`` dry run
failed). Errors are printed to stderr as ``error: <code>: <message>``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cowboy_node.cli import hints
from cowboy_node.cli.common import (
    EXIT_TX_FAILED,
    U64_MAX,
    U128_MAX,
    SignedOnly,
    SubParsers,
    UsageError,
    add_rpc_flag,
    address_arg,
    chain_id_arg,
    cli_command,
    positive_seconds_arg,
    print_error,
    print_hint,
    print_json,
    rpc_client,
    tx_hash_arg,
    uint_arg,
    wait_for_receipt,
)
from cowboy_protocol import api_types as api
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.http_client import ApiError, RpcClient
from cowboy_protocol.keys import KeyFileError, load_account_key, load_account_private_key, new_account_key
from cowboy_protocol.txfees import DEFAULT_PRIORITY_FEE
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError

DEFAULT_CYCLES_LIMIT = 50_000
DEFAULT_CELLS_LIMIT = 2_000
DEFAULT_WAIT_TIMEOUT_S = 30.0
MAX_BROADCAST_INPUT_BYTES = 16 * 1024 * 1024
"""Largest file (or stdin) ``tx broadcast`` reads."""
_HEX_TEXT_RE = re.compile(r"[0-9a-fA-F]+")

# -- status --------------------------------------------------------------------------
def status_summary(st: Mapping[str, Any]) -> str:
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
    return "\n".join(lines + _consensus_summary(st.get("consensus")))


def _consensus_summary(c: Any) -> list[str]:
    """The ``/status`` ``consensus`` section in words: who this validator is, the view and its leader, what is
    finalized, which peers are connected, whether it votes (issue 37: a testnet operator's first questions)."""
    if not isinstance(c, dict):
        return []
    n, me = c.get("validators"), c.get("me")
    peers = [p for p in c.get("peers") or [] if p != me]
    others = max(0, n - 1) if isinstance(n, int) else None
    voting = c.get("voting") or {}
    votes = "yes" if voting.get("enabled", True) else f"NO ({voting.get('reason')}" + (
        f", until view {voting['until_view']})" if voting.get("until_view") is not None else ")")
    return [
        f"validator:   {me} of {n} (quorum {c.get('quorum')}); votes: {votes}",
        f"view:        {c.get('view')} (leader {c.get('leader')}); finalized view {c.get('finalized_view')}, "
        f"height {c.get('finalized_height')}{'; SYNCING' if c.get('syncing') else ''}",
        f"peers:       {len(peers)} of {others} connected" + (f" ({', '.join(map(str, peers))})" if peers else ""),
    ]


@cli_command
def cmd_status(args: argparse.Namespace) -> int:
    """Print the node's status."""
    st = rpc_client(args).status()
    if args.json:
        print_json(st)
    else:
        print(status_summary(st if isinstance(st, dict) else {}))
    return 0


# -- keys ----------------------------------------------------------------------------
@cli_command
def cmd_keys_new(args: argparse.Namespace) -> int:
    """Generate an account key file."""

    try:
        address = new_account_key(args.out)
    except FileExistsError as e:
        print_error(str(e))
        return 1
    except OSError as e:
        print_error(f"cannot write key file {args.out}: {e.strerror or e}")
        return 1
    print_json({"address": to_checksum_address(address), "file": str(args.out)})
    return 0


@cli_command
def cmd_keys_show(args: argparse.Namespace) -> int:
    """Print the address of an account key file (never the private key)."""

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


def _fees(explicit_max: int | None, explicit_tip: int | None, basefee: int | None, max_flag: str,
          tip_flag: str) -> tuple[int, int]:
    """``(max fee, tip)``; ``basefee`` is only read when ``explicit_max`` is None."""
    if explicit_max is not None:
        max_fee = explicit_max
    else:
        assert basefee is not None
        max_fee = min(2 * basefee, U64_MAX)
    if explicit_tip is not None:
        if explicit_tip > max_fee:
            raise UsageError(f"{tip_flag} ({explicit_tip}) must not exceed {max_flag} ({max_fee})")
        tip = explicit_tip
    else:
        tip = min(DEFAULT_PRIORITY_FEE, max_fee)
    return max_fee, tip


def should_wait(args: argparse.Namespace) -> bool:
    """The one waiting rule of every ``tx`` command: wait unless ``--no-wait`` (or ``--sign-only``)."""
    return getattr(args, "wait", None) is not False and not getattr(args, "sign_only", False)


def receipt_failed(receipt: Mapping[str, Any]) -> bool:
    """True when a receipt's ``status`` is not ``success``."""
    return receipt.get("status") != "success"


def failure_of(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """``{"code", "message"}`` of a failed receipt (the message is the receipt's ``error_message``)."""
    code = receipt.get("error_code") or "failed"
    message = receipt.get("error_message") or code
    return {"code": code, "message": message}


def print_failure(what: str, receipt: Mapping[str, Any], *, host: str | None = None) -> None:
    """``error: <code>: <what> failed: <message>`` on stderr, then a ``hint:`` line when one fits
    (:mod:`cowboy_node.cli.hints`; ``host``: the job's HTTP host)."""
    f = failure_of(receipt)
    print_error(f"{f['code']}: {what} failed: {f['message']}")
    print_hint(hints.error_hint(f["code"], f["message"], host=host))


def load_key(args: argparse.Namespace) -> tuple[bytes, bytes]:
    """``(private key, address)`` from ``--key``; a bad file is a usage error (exit 2)."""

    try:
        return load_account_private_key(args.key)
    except KeyFileError as e:
        raise UsageError(f"--key: {e}") from None


def _next_pending_nonce(client: RpcClient, sender: bytes) -> int:
    account = client.account(sender)
    nonce = account.get("next_pending_nonce") if isinstance(account, dict) else None
    if not isinstance(nonce, int) or isinstance(nonce, bool) or nonce < 0:
        raise ApiError("invalid_response", "/account response has no valid next_pending_nonce", 200)
    return nonce


def submit(args: argparse.Namespace, client: RpcClient, sk: bytes, sender: bytes, instruction: Any) -> str:
    """:func:`submit_many` of one instruction; returns its tx hash."""
    return submit_many(args, client, sk, sender, [instruction])[0]


def submit_many(args: argparse.Namespace, client: RpcClient, sk: bytes, sender: bytes,
                instructions: Sequence[Any]) -> list[str]:
    """Build and sign one transaction per instruction (consecutive nonces) with the fee/limit flags of ``args``,
    submit them in order and return their hashes.

    The chain id and basefees come from ``/status`` unless ``--chain-id`` and both ``--max-fee-per-*`` are
    given; the first nonce from ``next_pending_nonce`` unless ``--nonce``. With ``--sign-only`` nothing is
    sent: each ``tx_bytes`` is printed as a 0x-hex line on stdout (the hashes go to stderr) and
    :class:`SignedOnly` ends the command (exit 0); with all four flags the node is never contacted.
    """

    if args.sign_only and getattr(args, "wait", None) is True:
        raise UsageError("--wait cannot be combined with --sign-only (nothing is sent)")
    chain_id: str | None = args.chain_id
    cycle_bf = cell_bf = None
    if chain_id is None or args.max_fee_per_cycle is None or args.max_fee_per_cell is None:
        node_chain_id, cycle_bf, cell_bf = _basefees(client.status())
        if chain_id is not None and chain_id != node_chain_id:
            raise UsageError(f"--chain-id {chain_id!r} does not match the node's chain id {node_chain_id!r}")
        chain_id = node_chain_id
    max_cycle, tip_cycle = _fees(args.max_fee_per_cycle, args.priority_fee_per_cycle, cycle_bf,
                                 "--max-fee-per-cycle", "--priority-fee-per-cycle")
    max_cell, tip_cell = _fees(args.max_fee_per_cell, args.priority_fee_per_cell, cell_bf,
                               "--max-fee-per-cell", "--priority-fee-per-cell")
    first = args.nonce if args.nonce is not None else _next_pending_nonce(client, sender)
    if first + len(instructions) - 1 > U64_MAX:
        raise UsageError(f"--nonce {first}: {len(instructions)} transactions would pass the u64 maximum")
    txs = [Transaction(
        chain_id=chain_id, nonce=first + i, sender=sender, instruction=instruction,
        cycles_limit=args.cycles_limit, cells_limit=args.cells_limit,
        max_fee_per_cycle=max_cycle, max_priority_fee_per_cycle=tip_cycle,
        max_fee_per_cell=max_cell, max_priority_fee_per_cell=tip_cell,
    ).signed(sk) for i, instruction in enumerate(instructions)]
    if args.sign_only:
        for tx in txs:
            print("0x" + tx.to_bytes().hex())
            print(f"signed 0x{tx.tx_hash().hex()} (nonce {tx.nonce}, chain {chain_id}); not sent", file=sys.stderr)
        raise SignedOnly
    return [_post(client, tx.to_bytes(), "0x" + tx.tx_hash().hex()) for tx in txs]


def _post(client: RpcClient, tx_bytes: bytes, local_hash: str) -> str:
    returned = client.submit(tx_bytes).get("tx_hash")
    return returned if isinstance(returned, str) else local_hash


def report(client: RpcClient, tx_hash: str, *, wait: bool, timeout: float, extra: dict[str, Any] | None = None,
           from_receipt: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
           explain: Callable[[Mapping[str, Any]], str | None] | None = None) -> int:
    """Print ``{**extra, "tx_hash"}``, or after waiting ``{..., "height", "receipt"}`` plus what
    ``from_receipt`` derives from the receipt; returns the exit code: :data:`EXIT_TX_FAILED` with an
    ``"error": {"code", "message"}`` (and the error on stderr) when the receipt says the transaction failed.
    ``explain`` may add a local, non-consensus detail to a failure (``error.detail``, also on stderr)."""
    head = {**(extra or {}), "tx_hash": tx_hash}
    if not wait:
        print_json(head)
        return 0
    receipt = wait_for_receipt(client, tx_hash, timeout)
    if receipt is None:
        message = f"no receipt for {tx_hash} after {timeout:g} s"
        print_json({**head, "error": {"code": "timeout", "message": message}})
        print_error(f"timeout: {message}")
        return 1
    if receipt_failed(receipt):
        error = failure_of(receipt)
        detail = explain(receipt) if explain is not None else None
        if detail is not None:
            error["detail"] = detail
        print_json({**head, "height": receipt.get("height"), "receipt": receipt, "error": error})
        print_failure(f"transaction {tx_hash}", receipt)
        if detail is not None:
            print_error(f"local check: {detail}")
        return EXIT_TX_FAILED
    derived = from_receipt(receipt) if from_receipt is not None else {}
    print_json({**head, "height": receipt.get("height"), "receipt": receipt, **derived})
    return 0


def report_hashes(client: RpcClient, hashes: list[str], *, wait: bool, timeout: float) -> int:
    """Print ``{"tx_hashes"}``, or after waiting for each in turn ``{"tx_hashes", "receipts"}``; returns the
    exit code (1 and ``"error"`` when one has no receipt within ``timeout``; :data:`EXIT_TX_FAILED` and
    ``"error"`` naming the first failed one when a receipt says its transaction failed)."""
    if not wait:
        print_json({"tx_hashes": hashes})
        return 0
    receipts: list[api.Receipt] = []
    for tx_hash in hashes:
        receipt = wait_for_receipt(client, tx_hash, timeout)
        if receipt is None:
            message = f"no receipt for {tx_hash} after {timeout:g} s"
            print_json({"tx_hashes": hashes, "receipts": receipts, "error": {"code": "timeout", "message": message}})
            print_error(f"timeout: {message}")
            return 1
        receipts.append(receipt)
    failed = next(((h, r) for h, r in zip(hashes, receipts, strict=True) if receipt_failed(r)), None)
    if failed is not None:
        print_json({"tx_hashes": hashes, "receipts": receipts, "error": {**failure_of(failed[1]),
                                                                          "tx_hash": failed[0]}})
        print_failure(f"transaction {failed[0]}", failed[1])
        return EXIT_TX_FAILED
    print_json({"tx_hashes": hashes, "receipts": receipts})
    return 0


@cli_command
def cmd_tx_transfer(args: argparse.Namespace) -> int:
    """Build, sign and submit a Transfer; optionally wait for its receipt."""

    sk, sender = load_key(args)
    client = rpc_client(args)
    tx_hash = submit(args, client, sk, sender, Transfer(to=args.to, amount=args.amount))
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout)


# -- tx broadcast --------------------------------------------------------------------
def _read_broadcast_input(source: str) -> tuple[str, str]:
    """``(text, where)`` of ``source``: ``-`` is stdin, an existing path is that file, and a ``0x…`` or
    all-hex argument that names no file is the hex itself."""
    if source == "-":
        raw = sys.stdin.buffer.read(MAX_BROADCAST_INPUT_BYTES + 1)
        where = "stdin"
    elif (source.startswith("0x") or _HEX_TEXT_RE.fullmatch(source) is not None) and not os.path.exists(source):
        return source, "the argument"
    else:
        try:
            with open(source, "rb") as f:
                raw = f.read(MAX_BROADCAST_INPUT_BYTES + 1)
        except OSError as e:
            raise UsageError(f"cannot read {source}: {e.strerror or e} (expected a file, - for stdin, or 0x-hex)") \
                from None
        where = source
    if len(raw) > MAX_BROADCAST_INPUT_BYTES:
        raise UsageError(f"{where} is larger than {MAX_BROADCAST_INPUT_BYTES} bytes")
    try:
        return raw.decode("ascii"), where
    except UnicodeDecodeError:
        raise UsageError(f"{where} is not hex text (non-ASCII byte; --sign-only prints 0x-hex)") from None


def parse_signed_transactions(text: str, where: str) -> list[bytes]:
    """The ``tx_bytes`` of each whitespace-separated 0x-hex entry of ``text``, each decoded and its signature
    checked (as ``--sign-only`` prints them); a problem is a :class:`UsageError` naming the entry."""

    entries = text.split()
    if not entries:
        raise UsageError(f"{where}: no signed transaction (expected 0x-hex as printed by --sign-only)")
    out: list[bytes] = []
    for i, entry in enumerate(entries, 1):
        name = where if len(entries) == 1 else f"{where}, entry {i}"
        digits = entry.removeprefix("0x")
        bad = next((c for c in digits if c not in "0123456789abcdefABCDEF"), None)
        if bad is not None or not digits:
            what = f"invalid character {bad!r}" if bad is not None else "no digits"
            raise UsageError(f"{name}: not hex ({what})")
        if len(digits) % 2:
            raise UsageError(f"{name}: not hex (odd number of digits: {len(digits)})")
        data = bytes.fromhex(digits)
        try:
            Transaction.from_bytes(data).verify_signature()
        except ValidationError as e:
            raise UsageError(f"{name}: not a signed transaction: {e.code}: {e}") from None
        out.append(data)
    return out


@cli_command
def cmd_tx_broadcast(args: argparse.Namespace) -> int:
    """Submit already-signed transactions (``--sign-only`` output) in order; every entry is checked first."""

    text, where = _read_broadcast_input(args.source)
    blobs = parse_signed_transactions(text, where)
    client = rpc_client(args)
    hashes = [_post(client, data, "0x" + keccak256(data[4:]).hex()) for data in blobs]
    if len(hashes) == 1:
        return report(client, hashes[0], wait=should_wait(args), timeout=args.timeout)
    return report_hashes(client, hashes, wait=should_wait(args), timeout=args.timeout)


# -- query ---------------------------------------------------------------------------
@cli_command
def cmd_query_account(args: argparse.Namespace) -> int:
    """Print an account's balance and nonces."""

    print_json(rpc_client(args).account(args.address))
    return 0


@cli_command
def cmd_query_block(args: argparse.Namespace) -> int:
    """Print a block header and its transaction hashes."""
    print_json(rpc_client(args).block(args.height))
    return 0


@cli_command
def cmd_query_tx(args: argparse.Namespace) -> int:
    """Print a transaction, with its receipt when committed."""
    client = rpc_client(args)
    tx: Any = client.transaction(args.hash)
    receipt: Any = None
    try:
        receipt = client.receipt(args.hash)
    except ApiError as e:
        if e.status != 404:
            raise
    if isinstance(tx, dict):
        tx = {**tx, "receipt": receipt}
    print_json(tx)
    return 0


# -- registration --------------------------------------------------------------------
def add_wait_flags(p: argparse.ArgumentParser) -> None:
    """``--no-wait`` / ``--wait`` (alias, the default) and ``--timeout``: the one waiting rule of every ``tx``
    command (:func:`should_wait`)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--no-wait", dest="wait", action="store_const", const=False, default=None,
                       help="print the tx hash once the node accepts it, without waiting for the receipt")
    group.add_argument("--wait", dest="wait", action="store_const", const=True,
                       help="wait for the receipt (the default; kept as an alias)")
    p.add_argument("--timeout", type=positive_seconds_arg, default=DEFAULT_WAIT_TIMEOUT_S, metavar="S",
                   help=f"receipt wait timeout in seconds (default {DEFAULT_WAIT_TIMEOUT_S:g})")


def add_tx_flags(p: argparse.ArgumentParser, *, cycles_limit: int = DEFAULT_CYCLES_LIMIT,
                 cells_limit: int | None = DEFAULT_CELLS_LIMIT, cells_help: str | None = None) -> None:
    """``--rpc``, ``--no-wait``/``--wait``/``--timeout``, the limit and fee flags and the signing flags
    (``--nonce``, ``--chain-id``, ``--sign-only``) shared by every ``tx`` command.

    ``cells_limit=None`` leaves the default to the command (it depends on what it carries).
    """
    add_rpc_flag(p)
    p.add_argument("--nonce", type=uint_arg(U64_MAX, "u64"), default=None, metavar="N",
                   help="the (first) transaction's nonce (default: the sender's next_pending_nonce from the node)")
    p.add_argument("--chain-id", type=chain_id_arg, default=None, metavar="ID",
                   help="chain id to sign for (default: from /status; if both are known they must agree)")
    p.add_argument("--sign-only", action="store_true",
                   help="print the signed tx_bytes as 0x-hex (one line per transaction) and send nothing; with "
                        "--nonce, --chain-id, --max-fee-per-cycle and --max-fee-per-cell the node is not contacted")
    add_wait_flags(p)
    u64 = uint_arg(U64_MAX, "u64")
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


"""The ``add_subparsers()`` object command groups register on (a string: the class is not subscriptable at run time)."""


def register_base(subparsers: SubParsers) -> tuple[SubParsers, SubParsers]:
    """Add status, keys, ``tx transfer|broadcast`` and ``query account|block|tx`` to ``subparsers``; returns the
    ``tx`` and ``query`` subparsers for the other command groups (:func:`cowboy_node.cli.commands.register`)."""
    st = subparsers.add_parser("status", help="show the node's chain status")
    add_rpc_flag(st)
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
    tt.add_argument("--to", required=True, type=address_arg, metavar="ADDRESS", help="recipient (0x + 40 hex)")
    tt.add_argument("--amount", required=True, type=uint_arg(U128_MAX, "u128"), metavar="N",
                    help="amount in the smallest unit")
    add_tx_flags(tt)
    tt.set_defaults(func=cmd_tx_transfer)

    tb = tx_sub.add_parser("broadcast", help="submit transactions signed earlier with --sign-only")
    tb.add_argument("source", metavar="FILE|HEX",
                    help="a file of 0x-hex lines as --sign-only prints them, - for stdin, or the hex itself")
    add_rpc_flag(tb)
    add_wait_flags(tb)
    tb.set_defaults(func=cmd_tx_broadcast)

    q = subparsers.add_parser("query", help="read chain data from the node")
    q_sub = q.add_subparsers(dest="query_command", required=True)
    qa = q_sub.add_parser("account", help="balance and nonces of an account")
    qa.add_argument("address", type=address_arg, metavar="ADDRESS")
    add_rpc_flag(qa)
    qa.set_defaults(func=cmd_query_account)
    qb = q_sub.add_parser("block", help="a block header and its transaction hashes")
    qb.add_argument("height", type=uint_arg(U64_MAX, "u64"), metavar="HEIGHT")
    add_rpc_flag(qb)
    qb.set_defaults(func=cmd_query_block)
    qt = q_sub.add_parser("tx", help="a transaction and its receipt")
    qt.add_argument("hash", type=tx_hash_arg, metavar="HASH")
    add_rpc_flag(qt)
    qt.set_defaults(func=cmd_query_tx)
    return tx_sub, q_sub
