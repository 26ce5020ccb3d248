"""``cowboy-node testnet``: generate the homes of a local (or static multi-machine) validator network."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.cli.common import SubParsers
from cowboy_node.node.devgenesis import MAX_VALIDATORS
from cowboy_node.node.testnet import DEFAULT_BASE_PORT, TestnetError, create_testnet
from cowboy_protocol.keys import KeyFileError


def _validators(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer in 1..{MAX_VALIDATORS}, got {text!r}") from None
    if not 1 <= n <= MAX_VALIDATORS:
        raise argparse.ArgumentTypeError(f"expected an integer in 1..{MAX_VALIDATORS}, got {n}")
    return n


def cmd_testnet(args: argparse.Namespace) -> int:
    """Write OUTPUT/validator-<i>/ homes, OUTPUT/faucet.key and OUTPUT/testnet.json; print the summary."""
    try:
        layout = create_testnet(
            Path(args.output), args.validators, chain_id=args.chain_id, block_time_ms=args.block_time_ms,
            base_port=args.base_port, host=args.host or ["127.0.0.1"], cip11_phase=args.cip11_phase)
    except (TestnetError, ConfigError, KeyFileError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(layout.summary(), indent=2))
    return 0


def register(subparsers: SubParsers) -> None:
    """Add the ``testnet`` subcommand."""
    p = subparsers.add_parser(
        "testnet", help="generate the homes of an N-validator network (one dealt threshold key, one genesis)",
        description="Deal one threshold BLS key to N validators (threshold N - floor((N-1)/3)), write one genesis "
                    "and OUTPUT/validator-<i>/ homes with distinct ports and [p2p] peers, OUTPUT/faucet.key and "
                    "OUTPUT/testnet.json. Whoever runs this learns every key share: hand each home to its operator "
                    "over a secure channel.")
    p.add_argument("--validators", type=_validators, required=True, help=f"number of validators (1..{MAX_VALIDATORS})")
    p.add_argument("--output", required=True, help="directory for the homes (must not hold a validator-0 home)")
    p.add_argument("--chain-id", default="cowboy-testnet-1")
    p.add_argument("--block-time-ms", type=int, default=None)
    p.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT,
                   help="validator i uses BASE+10i (RPC), +1 (runner QUIC), +2 (p2p), +3 (metrics); "
                        "0 picks free ports below the kernel's ephemeral range (from 20000)")
    p.add_argument("--host", action="append", default=None,
                   help="address the validators listen on and dial each other at (default 127.0.0.1); give it "
                        "once for all, or once per validator in order for validators on different machines")
    p.add_argument("--cip11-phase", type=int, choices=(0, 1, 2, 3), default=2,
                   help="0 all CIP-11 flags off; 1 transport+shadow; 2 present-first (default); 3 poll disabled")
    p.set_defaults(func=cmd_testnet)
