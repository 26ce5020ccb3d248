"""Which validators the runner opens sessions with, and where: ``Sub(R)`` (CIP-11 §5.1) over the snapshot the
validator's ``/status`` publishes, mapped to QUIC endpoints from ``runner.toml``.

The snapshot is checked before use: its ``validator_set_hash`` must be the keccak of the listed keys and the
validator behind ``validator_rpc`` must be a member (a node that lies about either is a bad validator identity,
refused at start-up). A subset member without a configured endpoint is reported, not fatal: the daemon keeps the
sessions it can open and the poll fallback (§14) covers the rest.

Reconfiguration (§5.3): when ``/status`` also publishes ``reconfiguration`` (a ``ValidatorSetActivated(E+1, h)``
the node knows of: ``old``/``new`` snapshots, ``activation_height``, ``overlap_blocks``), the plan at height H is
``Sub_E(R)`` before ``h``, the union ``Sub_E(R) ∪ Sub_{E+1}(R)`` for ``h ≤ H < h + OVERLAP_BLOCKS`` and
``Sub_{E+1}(R)`` from the cutoff on (:func:`cowboy_protocol.transport.subset.runner_sessions`); each target
carries the snapshot its Hello offers and verifies (epoch-paired, never mixed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cowboy_protocol.netaddr import parse_host_port
from cowboy_protocol.transport.preimages import validator_set_hash
from cowboy_protocol.transport.subset import (
    MAX_SUBSET,
    MIN_SUBSET,
    EpochSnapshot,
    Reconfiguration,
    runner_sessions,
    valid_snapshots,
)


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
    reconfiguration: Reconfiguration | None = None
    """The ``ValidatorSetActivated(E+1, h)`` the node published (None: a static set)."""
    overlap_blocks: int = 160
    """OVERLAP_BLOCKS the node published with it (the governed value at its head)."""

    def epoch_snapshot(self) -> EpochSnapshot:
        """This snapshot as the subset functions take it."""
        return EpochSnapshot(self.subset_epoch, self.validators)

    def valid_at(self, height: int) -> tuple[EpochSnapshot, ...]:
        """The snapshots valid at ``height``, oldest first (§5.3)."""
        return valid_snapshots(self.epoch_snapshot(), self.reconfiguration, height, self.overlap_blocks)


@dataclass(frozen=True, slots=True)
class SessionTarget:
    """One validator of ``Sub(R)`` and where to reach it."""

    validator: bytes
    """Raw Ed25519 peer_pubkey the session must authenticate."""
    host: str
    """QUIC host."""
    port: int
    """QUIC port (UDP)."""
    snapshot: EpochSnapshot | None = None
    """The snapshot whose ``(subset_epoch, validator_set_hash)`` the session offers and verifies (§5.3)."""


def _key(text: object, where: str) -> bytes:
    if not isinstance(text, str) or not text.startswith("0x") or len(text) != 66:
        raise SnapshotError(f"{where}: expected 0x + 64 hex digits, got {text!r}")
    try:
        return bytes.fromhex(text[2:])
    except ValueError:
        raise SnapshotError(f"{where}: not hex: {text!r}") from None


def _snapshot(vs: Any, where: str) -> tuple[int, tuple[bytes, ...]]:
    if not isinstance(vs, dict) or not isinstance(vs.get("validators"), list) or not vs["validators"]:
        raise SnapshotError(f"{where}.validators: expected a non-empty list")
    keys = tuple(_key((v or {}).get("ed25519_public_key") if isinstance(v, dict) else None,
                      f"{where}.validators[{i}].ed25519_public_key")
                 for i, v in enumerate(vs["validators"]))
    if len(set(keys)) != len(keys):
        raise SnapshotError(f"{where}.validators: duplicate peer key")
    if _key(vs.get("validator_set_hash"), f"{where}.validator_set_hash") != validator_set_hash(keys):
        raise SnapshotError(f"{where}.validator_set_hash does not hash the listed validators")
    epoch = vs.get("subset_epoch", 0)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise SnapshotError(f"{where}.subset_epoch: expected an integer >= 0, got {epoch!r}")
    return epoch, keys


def _uint(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SnapshotError(f"{where}: expected an integer >= 0, got {value!r}")
    return value


def snapshot_from_status(status: Mapping[str, Any]) -> Snapshot:
    """Read and check the snapshot in a node's ``/status`` (a node without ``validator_set`` is a one-validator
    network: the snapshot is its own key), with its ``reconfiguration`` when it publishes one (§5.3): then
    ``validator_set`` is the old snapshot E and the node's validator must be in E or E+1."""
    me = _key((status.get("validator") or {}).get("ed25519_public_key"), "status.validator.ed25519_public_key")
    vs = status.get("validator_set")
    if vs is None:
        return Snapshot(0, (me,), me)
    rc = status.get("reconfiguration")
    if rc is not None:
        if not isinstance(rc, dict):
            raise SnapshotError("status.reconfiguration: expected an object")
        old = EpochSnapshot(*_snapshot(rc.get("old"), "status.reconfiguration.old"))
        new = EpochSnapshot(*_snapshot(rc.get("new"), "status.reconfiguration.new"))
        try:
            recfg = Reconfiguration(old, new, _uint(rc.get("activation_height"),
                                                    "status.reconfiguration.activation_height"))
        except ValueError as e:
            raise SnapshotError(f"status.reconfiguration: {e}") from None
        overlap = _uint(rc.get("overlap_blocks"), "status.reconfiguration.overlap_blocks")
        if me not in old.validators and me not in new.validators:
            raise SnapshotError("the validator behind runner.validator_rpc is in neither snapshot of its "
                                "reconfiguration")
        return Snapshot(old.epoch, old.validators, me, recfg, overlap)
    epoch, keys = _snapshot(vs, "status.validator_set")
    if me not in keys:
        raise SnapshotError("the validator behind runner.validator_rpc is not in its own validator-set snapshot")
    return Snapshot(epoch, keys, me)


def discovered_endpoints(doc: Mapping[str, Any] | None) -> tuple[dict[bytes, tuple[str, int]], tuple[str, ...]]:
    """The QUIC endpoints a validator's ``GET /validators`` lists (validators announce theirs to each other):
    ``{peer_pubkey: (host, port)}`` and a message per unusable entry (skipped, never fatal)."""
    out: dict[bytes, tuple[str, int]] = {}
    problems: list[str] = []
    for i, v in enumerate((doc or {}).get("validators") or []):
        if not isinstance(v, dict) or v.get("quic_endpoint") is None:
            continue
        try:
            key = _key(v.get("ed25519_public_key"), f"validators[{i}].ed25519_public_key")
            out[key] = parse_host_port(str(v["quic_endpoint"]), key=f"validators[{i}].quic_endpoint")
        except (SnapshotError, ValueError) as e:
            problems.append(f"GET /validators: {e}")
    return out, tuple(problems)


def discovered_rpc_urls(doc: Mapping[str, Any] | None) -> list[str]:
    """The other validators' HTTP API URLs ``GET /validators`` lists (``rpc_url``), in snapshot order: where the
    runner fails over when its own validator's API is unreachable."""
    return [str(v["rpc_url"]) for v in (doc or {}).get("validators") or []
            if isinstance(v, dict) and isinstance(v.get("rpc_url"), str) and v["rpc_url"]]


def plan_sessions(runner_pubkey: bytes, snapshot: Snapshot, rpc_quic_endpoint: tuple[str, int],
                  endpoints: dict[bytes, tuple[str, int]], *, height: int = 0, min_subset: int = MIN_SUBSET,
                  max_subset: int = MAX_SUBSET) -> tuple[tuple[SessionTarget, ...], tuple[str, ...]]:
    """Targets for every member of ``Sub(R)`` (§5.3: of the union of the snapshots valid at ``height`` during a
    reconfiguration overlap) with a known endpoint, and one message per member without one. ``min_subset`` /
    ``max_subset``: the governed MIN_SUBSET/MAX_SUBSET (``GET /params`` ``cip11_params``)."""
    targets: list[SessionTarget] = []
    missing: list[str] = []
    for planned in runner_sessions(runner_pubkey, snapshot.valid_at(height), min_subset=min_subset,
                                   max_subset=max_subset):
        v = planned.validator
        if v == snapshot.rpc_validator:
            host, port = rpc_quic_endpoint
        elif v in endpoints:
            host, port = endpoints[v]
        else:
            missing.append(f'validators."0x{v.hex()}": validator in this runner\'s subset Sub(R) has no QUIC '
                           "endpoint configured; no session with it (push from it is lost, poll covers)")
            continue
        targets.append(SessionTarget(v, host, port, planned.snapshot))
    return tuple(targets), tuple(missing)
