"""``cowboy-node tx governance set-phase|set-param|activate-validator-set`` and ``query governance`` (CIP-11
§5.3–§5.4, §13–§14).

The transactions are system instructions: only a key in genesis ``system_deployers`` may send them (anyone
else gets a failed receipt ``unauthorized``). A change is scheduled for ``--at-height`` and applied from that
height on; the rules it must pass are in ``cowboy_node/execution/governance.py`` and docs/operations.md
"Governance" (``activate-validator-set``: ``cowboy_node/execution/validator_set_activation.py``, docs/transport.md
"Reconfiguration"). ``--sign-only`` prints the signed transaction for an offline governance key, like every ``tx``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from cowboy_node.cli.client_commands import add_tx_flags, load_key, report, should_wait, submit_many
from cowboy_node.cli.common import (
    U64_MAX,
    SubParsers,
    UsageError,
    add_rpc_flag,
    cli_command,
    print_json,
    rpc_client,
    uint_arg,
)
from cowboy_node.node.keys import load_validator_key
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.http_client import RpcClient
from cowboy_protocol.keys import KeyFileError
from cowboy_protocol.types.governance_instructions import (
    MAX_PARAM_NAME_BYTES,
    GovernanceSetParam,
    GovernanceSetPhase,
)
from cowboy_protocol.types.instructions import (
    Instruction,
    ValidatorApproved,
    approval_preimage,
    instruction_to_cbor,
)
from cowboy_protocol.types.validator_set_instructions import (
    MAX_SET_VALIDATORS,
    PEER_PUBKEY_LEN,
    ActivateValidatorSet,
)

_NAME_RE = re.compile(r"[A-Za-z0-9_.]+")
_PEER_KEY_RE = re.compile(rf"(0[xX])?[0-9a-fA-F]{{{2 * PEER_PUBKEY_LEN}}}")
_INDEX_RE = re.compile(r"[0-9]{1,3}")


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
    return uint_arg(U64_MAX, "u64")(text)


def _validator_ref(text: str) -> bytes | int:
    """One ``--validators`` entry: a 32-byte Ed25519 peer key in hex, or a position in ``GET /validators``
    (``ValidatorSetSnapshot(0)``, i.e. genesis, order) resolved against the node later."""
    t = text.strip()
    if _INDEX_RE.fullmatch(t) is not None:
        return int(t)
    if _PEER_KEY_RE.fullmatch(t) is not None:
        return bytes.fromhex(t[2:] if t[:2] in ("0x", "0X") else t)
    raise argparse.ArgumentTypeError(f"expected a validator's Ed25519 peer key (0x + {2 * PEER_PUBKEY_LEN} hex "
                                     f"digits) or its position in GET /validators (0, 1, ...), got {text!r}")


def _resolve_validators(client: RpcClient, refs: list[bytes | int]) -> tuple[bytes, ...]:
    """The peer keys ``refs`` name, in the order given (positions read from ``GET /validators``, which lists
    the consensus participants in ``ValidatorSetSnapshot(0)`` order; keys alone never contact the node)."""
    known: list[bytes] = []
    if any(isinstance(r, int) for r in refs):
        known = [bytes.fromhex(str(v["ed25519_public_key"]).removeprefix("0x"))
                 for v in client.validators()["validators"]]
    keys: list[bytes] = []
    for r in refs:
        if isinstance(r, int):
            if r >= len(known):
                raise UsageError(f"--validators: {r} is not a validator position (GET /validators lists "
                                 f"{len(known)}: 0..{len(known) - 1})")
            r = known[r]
        if r in keys:
            raise UsageError(f"--validators: 0x{r.hex()} is listed twice")
        keys.append(r)
    if len(keys) > MAX_SET_VALIDATORS:
        raise UsageError(f"--validators: at most {MAX_SET_VALIDATORS} validators, got {len(keys)}")
    return tuple(keys)


def _approve(args: argparse.Namespace, client: RpcClient, ins: Instruction) -> int:
    """``--approve-with``: print this validator's approval of ``ins`` (a JSON document to hand to whoever
    submits; nothing is sent)."""
    try:
        key = load_validator_key(args.approve_with)
    except (KeyFileError, ValueError) as e:
        raise UsageError(f"--approve-with: {e}") from None
    chain_id = client.status()["chain_id"]
    nonce = int(client.params()["governance"]["approval_nonce"])
    seed = key.ed25519_seed
    print_json({"validator": "0x" + ed25519.public_key_from_seed(seed).hex(), "chain_id": chain_id,
                 "nonce": nonce, "instruction": "0x" + encode(instruction_to_cbor(ins)).hex(),
                 "approves": ins.to_json(),
                 "signature": "0x" + ed25519.sign(seed, approval_preimage(chain_id, nonce, ins)).hex()})
    return 0


def _with_approvals(client: RpcClient, ins: Instruction, files: list[str]) -> ValidatorApproved:
    """Wrap ``ins`` with the approvals in ``files`` (each printed by ``--approve-with``), ordered by the
    validators' positions in ``GET /validators``."""
    index = {v["ed25519_public_key"].lower(): i for i, v in enumerate(client.validators()["validators"])}
    wanted = "0x" + encode(instruction_to_cbor(ins)).hex()
    approvals: dict[int, bytes] = {}
    for path in files:
        try:
            doc = json.loads(Path(path).read_text())
            who, signature = str(doc["validator"]).lower(), bytes.fromhex(str(doc["signature"])[2:])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UsageError(f"--approvals {path}: not an approval file ({e})") from None
        if doc.get("instruction") != wanted:
            raise UsageError(f"--approvals {path}: approves another instruction than this command's")
        if who not in index:
            raise UsageError(f"--approvals {path}: {who} is not a validator of this chain")
        approvals[index[who]] = signature
    return ValidatorApproved(ins, tuple(sorted(approvals.items())))


def _governed(args: argparse.Namespace, ins: Instruction) -> int:
    """Approve (``--approve-with``), or submit directly or wrapped with ``--approvals`` (``--key`` pays)."""
    client = rpc_client(args)
    if args.approve_with is not None:
        return _approve(args, client, ins)
    if args.key is None:
        raise UsageError("--key is required (or --approve-with to approve as a validator)")
    sk, sender = load_key(args)
    tx_ins = _with_approvals(client, ins, args.approvals) if args.approvals else ins
    [tx_hash] = submit_many(args, client, sk, sender, [tx_ins])
    return report(client, tx_hash, wait=should_wait(args), timeout=args.timeout, extra=tx_ins.to_json())


@cli_command
def cmd_tx_governance_set_phase(args: argparse.Namespace) -> int:
    """Schedule a CIP-11 phase step at ``--at-height``."""
    return _governed(args, GovernanceSetPhase(phase=args.phase, activation_height=args.at_height))


@cli_command
def cmd_tx_governance_set_param(args: argparse.Namespace) -> int:
    """Schedule a governed CIP-11 parameter change at ``--at-height``."""
    return _governed(args, GovernanceSetParam(name=args.name, value=args.value, activation_height=args.at_height))


@cli_command
def cmd_tx_governance_activate_validator_set(args: argparse.Namespace) -> int:
    """Schedule ``ValidatorSetActivated(E+1, --at-height)`` with the listed validators (CIP-11 §5.3)."""
    keys = _resolve_validators(rpc_client(args), args.validators)
    return _governed(args, ActivateValidatorSet(peer_pubkeys=keys, activation_height=args.at_height))


def _add_approval_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", metavar="FILE", help="account key that pays (a system deployer's when sent directly)")
    p.add_argument("--approve-with", metavar="VALIDATOR_KEY", default=None,
                   help="print this validator's approval (keys/validator.key of its home) instead of sending")
    p.add_argument("--approvals", nargs="+", metavar="FILE", default=None,
                   help="with more than one validator: approval files of 2f+1 validators (from --approve-with)")


@cli_command
def cmd_query_governance(args: argparse.Namespace) -> int:
    """Print the active phase and governed values and the pending changes (``GET /params`` → governance)."""
    params = rpc_client(args).params()
    doc = params.get("governance") if isinstance(params, dict) else None
    if not isinstance(doc, dict):
        doc = {"error": "the node's /params has no governance section (older node)"}
    print_json({"height": params.get("height") if isinstance(params, dict) else None, **doc})
    return 0


def register_tx(tx_sub: SubParsers) -> None:
    """Add ``tx governance set-phase|set-param|activate-validator-set``."""
    g = tx_sub.add_parser("governance", help="CIP-11 governance: schedule phase and parameter changes "
                          "(system deployer key)")
    g_sub = g.add_subparsers(dest="governance_command", required=True)
    height = uint_arg(U64_MAX, "u64")

    sp = g_sub.add_parser("set-phase", help="schedule a CIP-11 rollout phase step (0→1→2→3, or one step back)")
    sp.add_argument("phase", type=uint_arg(3, "phase 0..3"), metavar="N", help="target phase 0..3")
    sp.add_argument("--at-height", required=True, type=height, metavar="H",
                    help="first height that runs in the new phase (above the current height)")
    _add_approval_flags(sp)
    add_tx_flags(sp)
    sp.set_defaults(func=cmd_tx_governance_set_phase)

    pp = g_sub.add_parser("set-param", help="schedule a governed CIP-11 parameter change (query governance "
                          "lists the names)")
    pp.add_argument("name", type=_param_name, metavar="NAME", help="e.g. OVERLAP_BLOCKS, HEARTBEAT_TIMEOUT_BLOCKS, "
                    "PRESENCE_HARD_EXCLUDE_ENABLED, runner.unbonding_blocks")
    pp.add_argument("value", type=_param_value, metavar="VALUE", help="unsigned integer (flags: 0/1, true/false)")
    pp.add_argument("--at-height", required=True, type=height, metavar="H",
                    help="first height that runs with the new value (above the current height)")
    _add_approval_flags(pp)
    add_tx_flags(pp)
    pp.set_defaults(func=cmd_tx_governance_set_param)

    av = g_sub.add_parser("activate-validator-set", help="schedule the next runner-facing validator-set snapshot "
                          "(CIP-11 §5.3: E+1 valid from --at-height, E kept for OVERLAP_BLOCKS more)")
    av.add_argument("--validators", required=True, nargs="+", type=_validator_ref, metavar="KEY_OR_INDEX",
                    help="the members of E+1 in genesis order: Ed25519 peer keys (0x + 64 hex) or positions in "
                    "GET /validators; a subsequence of the genesis validators (checked by the chain)")
    av.add_argument("--at-height", required=True, type=height, metavar="H",
                    help="activation height: first height at which E+1 is valid (at least 2 above the including "
                    "block)")
    _add_approval_flags(av)
    add_tx_flags(av)
    av.set_defaults(func=cmd_tx_governance_activate_validator_set)


def register_query(q_sub: SubParsers) -> None:
    """Add ``query governance``."""
    qg = q_sub.add_parser("governance", help="CIP-11 phase, governed values and pending changes")
    add_rpc_flag(qg)
    qg.set_defaults(func=cmd_query_governance)
