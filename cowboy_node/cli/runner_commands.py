"""Runner Registry client subcommands: ``tx register-runner|runner-heartbeat|update-runner|deregister-runner``
and ``query runners|runner|params``.

Same conventions as :mod:`cowboy_node.cli.client_commands` (JSON on stdout; exit 0 success, 1 node error /
unreachable / wait timeout, 2 bad input). The capabilities file format is in docs/runners.md §4 (example:
``configs/examples/runner-capabilities.json``); a bad file is exit 2 with an ``invalid_capabilities``
message naming the key.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cowboy_node.cli.client_commands import (
    add_tx_flags,
    load_key,
    report,
    report_hashes,
    should_wait,
    submit,
    submit_many,
)
from cowboy_node.cli.common import (
    U128_MAX,
    UsageError,
    add_rpc_flag,
    address_arg,
    cli_command,
    print_json,
    rpc_client,
    uint_arg,
)
from cowboy_protocol.codec import encode
from cowboy_protocol.txfees import CELLS_MARGIN, REGISTER_CYCLES_LIMIT, RUNNER_CYCLES_LIMIT
from cowboy_protocol.types.instructions import instruction_to_cbor
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.validation_errors import ValidationError

MAX_CAPABILITIES_FILE_BYTES = 256 * 1024
"""Largest capabilities file read."""
MAX_RUNNERS_LIMIT = 1000


def _read_capabilities(path: str, *, require_rate_card: bool) -> tuple[Any, Any]:
    """``(Capabilities, RateCard | None)`` from a capabilities JSON file; problems are usage errors."""

    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(f"--capabilities: cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_CAPABILITIES_FILE_BYTES:
        raise UsageError(f"--capabilities: {path} is larger than {MAX_CAPABILITIES_FILE_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"--capabilities: {path} is not valid JSON: {e}") from None
    try:
        return runner_file_from_json(doc, require_rate_card=require_rate_card)
    except ValidationError as e:
        raise UsageError(f"--capabilities: {path}: {e.code}: {e.message}") from None


def _cells_for(args: argparse.Namespace, *instructions: Any) -> None:
    if args.cells_limit is None:

        size = max(len(encode(instruction_to_cbor(ins))) for ins in instructions)
        args.cells_limit = 2 * size + CELLS_MARGIN


# -- tx commands -----------------------------------------------------------------------
@cli_command
def cmd_tx_register_runner(args: argparse.Namespace) -> int:
    """Register the key's address as a runner, bonding ``--stake``."""

    caps, card = _read_capabilities(args.capabilities, require_rate_card=True)
    sk, sender = load_key(args)
    ins = RunnerRegister(stake=args.stake, capabilities=caps, rate_card=card)
    _cells_for(args, ins)
    client = rpc_client(args)
    return report(client, submit(args, client, sk, sender, ins), wait=should_wait(args), timeout=args.timeout)


@cli_command
def cmd_tx_runner_heartbeat(args: argparse.Namespace) -> int:
    """The on-chain heartbeat: HEALTHY (accepting jobs) or, with ``--paused``, PAUSED."""

    sk, sender = load_key(args)
    client = rpc_client(args)
    tx_hash = submit(args, client, sk, sender, RunnerHeartbeat(accepting=not args.paused))
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout)


@cli_command
def cmd_tx_update_runner(args: argparse.Namespace) -> int:
    """Replace the capabilities, and the rate card when the file has one (two transactions, in that order)."""

    caps, card = _read_capabilities(args.capabilities, require_rate_card=False)
    sk, sender = load_key(args)
    instructions: list[Any] = [RunnerUpdateCapabilities(caps)]
    if card is not None:
        instructions.append(RunnerUpdateRateCard(card))
    _cells_for(args, *instructions)
    client = rpc_client(args)
    # consecutive nonces: the rate card follows the capabilities (two lines with --sign-only)
    hashes = submit_many(args, client, sk, sender, instructions)
    return report_hashes(client, hashes, wait=should_wait(args), timeout=args.timeout)


@cli_command
def cmd_tx_deregister_runner(args: argparse.Namespace) -> int:
    """Deregister; the stake comes back ``unbonding_blocks`` later (see ``query params``)."""

    sk, sender = load_key(args)
    client = rpc_client(args)
    tx_hash = submit(args, client, sk, sender, RunnerDeregister())
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout)


# -- query commands --------------------------------------------------------------------
@cli_command
def cmd_query_runners(args: argparse.Namespace) -> int:
    """The active-runner array in registry-index order, with each record."""
    print_json(rpc_client(args).active_runners(offset=args.offset, limit=args.limit))
    return 0


@cli_command
def cmd_query_runner(args: argparse.Namespace) -> int:
    """One runner's registration."""

    print_json(rpc_client(args).runner(args.address))
    return 0


@cli_command
def cmd_query_params(args: argparse.Namespace) -> int:
    """Every governed protocol parameter (basefee, timer, limits, cip11 flags, runners)."""
    print_json(rpc_client(args).params())
    return 0


# -- registration ----------------------------------------------------------------------
def _positive_limit(text: str) -> int:
    value = uint_arg(MAX_RUNNERS_LIMIT, "the listing maximum")(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def register_tx(tx_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the runner transactions to ``tx``."""
    cells_help = f"default 2 × instruction bytes + {CELLS_MARGIN}"
    tr = tx_sub.add_parser("register-runner", help="register this key as a runner, bonding a stake")
    tr.add_argument("--key", required=True, metavar="FILE", help="the runner's account key file (its identity)")
    tr.add_argument("--stake", required=True, type=uint_arg(U128_MAX, "u128"), metavar="N",
                    help="stake to bond, in the smallest unit (at least params.runners.min_runner_stake)")
    tr.add_argument("--capabilities", required=True, metavar="FILE.json",
                    help="capabilities and rate card (docs/runners.md §4)")
    add_tx_flags(tr, cycles_limit=REGISTER_CYCLES_LIMIT, cells_limit=None, cells_help=cells_help)
    tr.set_defaults(func=cmd_tx_register_runner)

    th = tx_sub.add_parser("runner-heartbeat", help="on-chain heartbeat (the CIP-11 eligibility floor)")
    th.add_argument("--key", required=True, metavar="FILE")
    th.add_argument("--paused", action="store_true", help="stay registered but accept no new jobs (PAUSED)")
    add_tx_flags(th, cycles_limit=RUNNER_CYCLES_LIMIT)
    th.set_defaults(func=cmd_tx_runner_heartbeat)

    tu = tx_sub.add_parser("update-runner", help="replace capabilities (and the rate card if the file has one)")
    tu.add_argument("--key", required=True, metavar="FILE")
    tu.add_argument("--capabilities", required=True, metavar="FILE.json", help="docs/runners.md §4")
    add_tx_flags(tu, cycles_limit=RUNNER_CYCLES_LIMIT, cells_limit=None, cells_help=cells_help)
    tu.set_defaults(func=cmd_tx_update_runner)

    td = tx_sub.add_parser("deregister-runner", help="leave the registry; the stake returns after unbonding")
    td.add_argument("--key", required=True, metavar="FILE")
    add_tx_flags(td, cycles_limit=RUNNER_CYCLES_LIMIT)
    td.set_defaults(func=cmd_tx_deregister_runner)


def register_query(q_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``query runners``, ``query runner`` and ``query params``."""
    qs = q_sub.add_parser("runners", help="the active-runner array (registry-index order) with records")
    qs.add_argument("--offset", type=uint_arg(2**32 - 1, "u32"), default=0, metavar="N", help="first registry index")
    qs.add_argument("--limit", type=_positive_limit, default=MAX_RUNNERS_LIMIT, metavar="N",
                    help=f"at most N runners (1..{MAX_RUNNERS_LIMIT}, default {MAX_RUNNERS_LIMIT})")
    add_rpc_flag(qs)
    qs.set_defaults(func=cmd_query_runners)

    qr = q_sub.add_parser("runner", help="one runner's registration")
    qr.add_argument("address", type=address_arg, metavar="ADDRESS")
    add_rpc_flag(qr)
    qr.set_defaults(func=cmd_query_runner)

    qp = q_sub.add_parser("params", help="all protocol parameters (basefee, timer, limits, cip11, runners)")
    add_rpc_flag(qp)
    qp.set_defaults(func=cmd_query_params)
