"""``cowboy-node tx governance set-phase|set-param`` and ``query governance`` (CIP-11 §13–§14).

The transactions are system instructions: only a key in genesis ``system_deployers`` may send them (anyone
else gets a failed receipt ``unauthorized``). A change is scheduled for ``--at-height`` and applied from that
height on; the rules it must pass are in ``cowboy_node/execution/governance.py`` and docs/operations.md
"Governance". ``--sign-only`` prints the signed transaction for an offline governance key, like every ``tx``.
"""

from __future__ import annotations

import argparse
import re

from cowboy_node.cli.client_commands import (
    U64_MAX,
    SubParsers,
    _add_rpc,
    _client,
    _print_json,
    _run,
    _uint,
    add_tx_flags,
    load_key,
    report,
    should_wait,
    submit_many,
)
from cowboy_protocol.types.governance_instructions import (
    MAX_PARAM_NAME_BYTES,
    GovernanceSetParam,
    GovernanceSetPhase,
)

_NAME_RE = re.compile(r"[A-Za-z0-9_.]+")


def _param_name(text: str) -> str:
    t = text.strip()
    if _NAME_RE.fullmatch(t) is None or len(t) > MAX_PARAM_NAME_BYTES:
        raise argparse.ArgumentTypeError(f"expected a parameter name such as OVERLAP_BLOCKS or runner.unbonding_blocks "
                                         f"(1..{MAX_PARAM_NAME_BYTES} of A-Z a-z 0-9 _ .), got {text!r}")
    return t


def _param_value(text: str) -> int:
    t = text.strip().lower()
    if t in ("true", "on"):
        return 1
    if t in ("false", "off"):
        return 0
    return _uint(U64_MAX, "u64")(text)


@_run
def cmd_tx_governance_set_phase(args: argparse.Namespace) -> int:
    """Schedule a CIP-11 phase step at ``--at-height``."""
    sk, sender = load_key(args)
    client = _client(args)
    ins = GovernanceSetPhase(phase=args.phase, activation_height=args.at_height)
    [tx_hash] = submit_many(args, client, sk, sender, [ins])
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout, extra=ins.to_json())


@_run
def cmd_tx_governance_set_param(args: argparse.Namespace) -> int:
    """Schedule a governed CIP-11 parameter change at ``--at-height``."""
    sk, sender = load_key(args)
    client = _client(args)
    ins = GovernanceSetParam(name=args.name, value=args.value, activation_height=args.at_height)
    [tx_hash] = submit_many(args, client, sk, sender, [ins])
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout, extra=ins.to_json())


@_run
def cmd_query_governance(args: argparse.Namespace) -> int:
    """Print the active phase and governed values and the pending changes (``GET /params`` → governance)."""
    params = _client(args).get_json("/params")
    doc = params.get("governance") if isinstance(params, dict) else None
    if not isinstance(doc, dict):
        doc = {"error": "the node's /params has no governance section (older node)"}
    _print_json({"height": params.get("height") if isinstance(params, dict) else None, **doc})
    return 0


def register_tx(tx_sub: SubParsers) -> None:
    """Add ``tx governance set-phase|set-param``."""
    g = tx_sub.add_parser("governance", help="CIP-11 governance: schedule phase and parameter changes "
                          "(system deployer key)")
    g_sub = g.add_subparsers(dest="governance_command", required=True)
    height = _uint(U64_MAX, "u64")

    sp = g_sub.add_parser("set-phase", help="schedule a CIP-11 rollout phase step (0→1→2→3, or one step back)")
    sp.add_argument("phase", type=_uint(3, "phase 0..3"), metavar="N", help="target phase 0..3")
    sp.add_argument("--at-height", required=True, type=height, metavar="H",
                    help="first height that runs in the new phase (above the current height)")
    sp.add_argument("--key", required=True, metavar="FILE", help="a system deployer's account key file")
    add_tx_flags(sp)
    sp.set_defaults(func=cmd_tx_governance_set_phase)

    pp = g_sub.add_parser("set-param", help="schedule a governed CIP-11 parameter change (query governance "
                          "lists the names)")
    pp.add_argument("name", type=_param_name, metavar="NAME", help="e.g. OVERLAP_BLOCKS, HEARTBEAT_TIMEOUT_BLOCKS, "
                    "PRESENCE_HARD_EXCLUDE_ENABLED, runner.unbonding_blocks")
    pp.add_argument("value", type=_param_value, metavar="VALUE", help="unsigned integer (flags: 0/1, true/false)")
    pp.add_argument("--at-height", required=True, type=height, metavar="H",
                    help="first height that runs with the new value (above the current height)")
    pp.add_argument("--key", required=True, metavar="FILE", help="a system deployer's account key file")
    add_tx_flags(pp)
    pp.set_defaults(func=cmd_tx_governance_set_param)


def register_query(q_sub: SubParsers) -> None:
    """Add ``query governance``."""
    qg = q_sub.add_parser("governance", help="CIP-11 phase, governed values and pending changes")
    _add_rpc(qg)
    qg.set_defaults(func=cmd_query_governance)
