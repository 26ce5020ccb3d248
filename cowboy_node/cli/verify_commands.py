"""``--verify`` on ``query account`` and ``query actor --key``, and ``query state KEY``: reads checked against the
genesis group key, not trusted from the node (``cowboy_protocol/verified_reads.py``).

The group key comes from ``--genesis FILE`` (a genesis.json: ``threshold.group_public_key``) or ``--group-key HEX``.
A verified answer prints ``{"verified": true, "height", "block_hash", "state_root", ...}``; one that does not verify
prints ``error: <code>: <why>`` and exits :data:`EXIT_UNVERIFIED` (``bad_certificate``, ``bad_proof``,
``value_mismatch``; ``uncertified`` only after :data:`UNCERTIFIED_RETRIES` tries: a head final only through a
descendant not committed yet gets its certificate a moment later).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cowboy_node.cli.common import (
    SubParsers,
    UsageError,
    add_rpc_flag,
    cli_command,
    print_error,
    print_json,
    rpc_client,
)
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import RpcClient
from cowboy_protocol.verified_reads import CertifiedHeader, Uncertified, VerificationError

EXIT_UNVERIFIED = 4
"""Exit code of a read that does not verify."""
UNCERTIFIED_RETRIES = 5
"""Tries of a read whose answer has no certificate yet (0.2 s apart)."""


def _hex_bytes(text: str) -> bytes:
    s = text[2:] if text.startswith(("0x", "0X")) else text
    try:
        return bytes.fromhex(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected hex, got {text!r}") from None


def group_key(args: argparse.Namespace) -> bytes:
    """The genesis group public key from ``--group-key`` or ``--genesis``; UsageError when neither is given."""
    if args.group_key is not None:
        if len(args.group_key) != 96:
            raise UsageError("--group-key must be 96 bytes (a compressed G2 point)")
        return bytes(args.group_key)
    if args.genesis is None:
        raise UsageError("--verify needs --genesis FILE (the network's genesis.json) or --group-key HEX")
    from cowboy_node.chain.genesis import load_genesis  # only a verified read needs the genesis parser

    return load_genesis(Path(args.genesis)).group_public_key


def _header_json(h: CertifiedHeader) -> dict[str, Any]:
    return {"verified": True, "height": h.height, "block_hash": "0x" + h.digest.hex(),
            "state_root": "0x" + h.state_root.hex()}


def _verified(args: argparse.Namespace, read: Callable[[RpcClient, bytes], dict[str, Any]]) -> int:
    key, client = group_key(args), rpc_client(args)
    for attempt in range(UNCERTIFIED_RETRIES):
        try:
            print_json(read(client, key))
            return 0
        except Uncertified as e:
            if attempt == UNCERTIFIED_RETRIES - 1:
                print_error(str(e))
                return EXIT_UNVERIFIED
            time.sleep(0.2)
        except VerificationError as e:
            print_error(str(e))
            return EXIT_UNVERIFIED
    raise AssertionError("unreachable")


def _read_account(args: argparse.Namespace) -> Callable[[RpcClient, bytes], dict[str, Any]]:
    def read(client: RpcClient, key: bytes) -> dict[str, Any]:
        a = client.verified_account(args.address, key)
        return {**_header_json(a.header), "address": to_checksum_address(args.address), "balance": str(a.balance),
                "nonce": a.nonce}
    return read


def _wrap(plain: Callable[[argparse.Namespace], int],
          verified: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return verified(args) if args.verify else plain(args)
    return run


@cli_command
def cmd_account_verified(args: argparse.Namespace) -> int:
    """``query account ADDRESS --verify``."""
    return _verified(args, _read_account(args))


@cli_command
def cmd_actor_state_verified(args: argparse.Namespace) -> int:
    """``query actor ADDRESS --key K --verify``."""
    if args.key is None or args.prefix is not None or args.limit is not None:
        raise UsageError("--verify needs --key (a prefix scan has no proof)")

    def read(client: RpcClient, key: bytes) -> dict[str, Any]:
        v = client.verified_actor_state(args.address, args.key, key)
        return {**_header_json(v.header), "address": to_checksum_address(args.address), "key": "0x" + args.key.hex(),
                "value": None if v.value is None else "0x" + v.value.hex()}
    return _verified(args, read)


@cli_command
def cmd_query_state(args: argparse.Namespace) -> int:
    """``query state KEY [--verify]``: a raw state key's value with its proof (``GET /state/proof``)."""
    if not args.verify:
        print_json(rpc_client(args).state_proof(args.state_key))
        return 0

    def read(client: RpcClient, key: bytes) -> dict[str, Any]:
        v = client.verified_state(args.state_key, key)
        return {**_header_json(v.header), "key": "0x" + args.state_key.hex(),
                "value": None if v.value is None else "0x" + v.value.hex()}
    return _verified(args, read)


def _add_verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verify", action="store_true",
                   help="check the answer against the genesis group key (finalization certificate + state proof)")
    p.add_argument("--genesis", metavar="FILE", help="genesis.json holding the group key (with --verify)")
    p.add_argument("--group-key", type=_hex_bytes, metavar="HEX", help="the genesis group key itself (with --verify)")


def register_query(q_sub: SubParsers) -> None:
    """Add ``--verify`` to ``query account`` and ``query actor`` (registered before), and ``query state``."""
    for name, verified in (("account", cmd_account_verified), ("actor", cmd_actor_state_verified)):
        p = q_sub.choices[name]
        _add_verify(p)
        p.set_defaults(func=_wrap(p.get_default("func"), verified))
    qs = q_sub.add_parser("state", help="a raw state key's value and proof (--verify: checked, not trusted)")
    qs.add_argument("state_key", type=_hex_bytes, metavar="KEY", help="raw state key as hex (e.g. acct/ ‖ address)")
    add_rpc_flag(qs)
    _add_verify(qs)
    qs.set_defaults(func=cmd_query_state)
