"""Which validators the runner opens sessions with, and where: ``Sub(R)`` (CIP-11 §5.1) over the snapshot the
validator's ``/status`` publishes, mapped to QUIC endpoints from ``runner.toml``.

The snapshot is checked before use: its ``validator_set_hash`` must be the keccak of the listed keys and the
validator behind ``validator_rpc`` must be a member (a node that lies about either is a bad validator identity,
refused at start-up). A subset member without a configured endpoint is reported, not fatal: the daemon keeps the
sessions it can open and the poll fallback (§14) covers the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cowboy_protocol.transport.preimages import validator_set_hash
from cowboy_protocol.transport.subset import subset


class SnapshotError(ValueError):
    """The validator's published validator-set snapshot is malformed or inconsistent."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The active validator-set snapshot (§5.4) as the runner sees it."""

    subset_epoch: int
    """Snapshot epoch (0 for the static genesis set)."""
    validators: tuple[bytes, ...]
    """Ordered raw Ed25519 peer_pubkeys."""
    rpc_validator: bytes
    """The peer_pubkey of the validator behind ``validator_rpc``."""


@dataclass(frozen=True, slots=True)
class SessionTarget:
    """One validator of ``Sub(R)`` and where to reach it."""

    validator: bytes
    """Raw Ed25519 peer_pubkey the session must authenticate."""
    host: str
    """QUIC host."""
    port: int
    """QUIC port (UDP)."""


def _key(text: object, where: str) -> bytes:
    if not isinstance(text, str) or not text.startswith("0x") or len(text) != 66:
        raise SnapshotError(f"{where}: expected 0x + 64 hex digits, got {text!r}")
    try:
        return bytes.fromhex(text[2:])
    except ValueError:
        raise SnapshotError(f"{where}: not hex: {text!r}") from None


def snapshot_from_status(status: dict[str, Any]) -> Snapshot:
    """Read and check the snapshot in a node's ``/status`` (a node without ``validator_set`` is a one-validator
    network: the snapshot is its own key)."""
    me = _key((status.get("validator") or {}).get("ed25519_public_key"), "status.validator.ed25519_public_key")
    vs = status.get("validator_set")
    if vs is None:
        return Snapshot(0, (me,), me)
    if not isinstance(vs, dict) or not isinstance(vs.get("validators"), list) or not vs["validators"]:
        raise SnapshotError("status.validator_set.validators: expected a non-empty list")
    keys = tuple(_key((v or {}).get("ed25519_public_key") if isinstance(v, dict) else None,
                      f"status.validator_set.validators[{i}].ed25519_public_key")
                 for i, v in enumerate(vs["validators"]))
    if len(set(keys)) != len(keys):
        raise SnapshotError("status.validator_set.validators: duplicate peer key")
    if _key(vs.get("validator_set_hash"), "status.validator_set.validator_set_hash") != validator_set_hash(keys):
        raise SnapshotError("status.validator_set.validator_set_hash does not hash the listed validators")
    if me not in keys:
        raise SnapshotError("the validator behind runner.validator_rpc is not in its own validator-set snapshot")
    epoch = vs.get("subset_epoch", 0)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise SnapshotError(f"status.validator_set.subset_epoch: expected an integer >= 0, got {epoch!r}")
    return Snapshot(epoch, keys, me)


def plan_sessions(runner_pubkey: bytes, snapshot: Snapshot, rpc_quic_endpoint: tuple[str, int],
                  endpoints: dict[bytes, tuple[str, int]]) -> tuple[tuple[SessionTarget, ...], tuple[str, ...]]:
    """Targets for every member of ``Sub(R)`` with a known endpoint, and one message per member without one."""
    targets: list[SessionTarget] = []
    missing: list[str] = []
    for v in subset(runner_pubkey, snapshot.validators):
        if v == snapshot.rpc_validator:
            host, port = rpc_quic_endpoint
        elif v in endpoints:
            host, port = endpoints[v]
        else:
            missing.append(f'validators."0x{v.hex()}": validator in this runner\'s subset Sub(R) has no QUIC '
                           "endpoint configured; no session with it (push from it is lost, poll covers)")
            continue
        targets.append(SessionTarget(v, host, port))
    return tuple(targets), tuple(missing)
