"""The runner's session plan: the snapshot from ``/status`` is checked, ``Sub(R)`` picks the validators, and
``runner.toml`` says where each one is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_runner.config import ConfigError, parse_settings, render_template
from cowboy_runner.sessions_plan import Snapshot, SnapshotError, plan_sessions, snapshot_from_status

G = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
TEN = [bytes([i]) * 32 for i in range(1, 11)]
# Sub(G) over TEN is v1, v4, v6, v7, v10 (golden, tests/unit/protocol/test_transport_subset.py).
SUB = (TEN[0], TEN[3], TEN[5], TEN[6], TEN[9])


def _status(keys: list[bytes], me: bytes, vsh: bytes | None = None) -> dict[str, Any]:
    return {"validator": {"ed25519_public_key": "0x" + me.hex()},
            "validator_set": {"subset_epoch": 0,
                              "validator_set_hash": "0x" + (vsh or keccak256(b"".join(keys))).hex(),
                              "validators": [{"name": f"v{i}", "ed25519_public_key": "0x" + k.hex()}
                                             for i, k in enumerate(keys)]}}


def test_snapshot_from_status_reads_the_published_set() -> None:
    snap = snapshot_from_status(_status(TEN, TEN[3]))
    assert snap == Snapshot(0, tuple(TEN), TEN[3])


def test_a_node_without_validator_set_is_a_one_validator_network() -> None:
    assert snapshot_from_status({"validator": {"ed25519_public_key": "0x" + TEN[0].hex()}}) == \
        Snapshot(0, (TEN[0],), TEN[0])


@pytest.mark.parametrize(("status", "message"), [
    (_status(TEN, TEN[0], vsh=bytes(32)), "does not hash the listed validators"),
    (_status(TEN[1:], TEN[0]), "not in its own validator-set snapshot"),
    (_status([TEN[0], TEN[0]], TEN[0]), "duplicate"),
    ({"validator": {"ed25519_public_key": "0x12"}}, "status.validator.ed25519_public_key"),
    ({"validator": {"ed25519_public_key": "0x" + TEN[0].hex()}, "validator_set": {"validators": []}},
     "non-empty"),
])
def test_an_inconsistent_snapshot_is_a_bad_validator_identity(status: dict[str, Any], message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        snapshot_from_status(status)


def test_plan_opens_one_session_per_subset_member_at_its_endpoint() -> None:
    snap = Snapshot(0, tuple(TEN), TEN[3])  # the RPC's validator (v4) is in Sub(G)
    endpoints = {v: (f"10.0.0.{v[0]}", 4433) for v in TEN if v != TEN[3]}
    targets, missing = plan_sessions(G, snap, ("rpc-host", 9000), endpoints)
    assert missing == ()
    assert [t.validator for t in targets] == list(SUB)
    assert [(t.host, t.port) for t in targets] == [("10.0.0.1", 4433), ("rpc-host", 9000), ("10.0.0.6", 4433),
                                                   ("10.0.0.7", 4433), ("10.0.0.10", 4433)]


def test_plan_never_connects_outside_the_subset() -> None:
    # v2 is the RPC's validator but not in Sub(G): the runner must not open a session with it (it would be
    # refused NotInSubset, §5.2).
    snap = Snapshot(0, tuple(TEN), TEN[1])
    endpoints = {v: ("h", 1) for v in TEN}
    targets, _ = plan_sessions(G, snap, ("rpc-host", 9000), endpoints)
    assert TEN[1] not in {t.validator for t in targets}
    assert len(targets) == 5


def test_plan_reports_subset_members_without_an_endpoint_by_config_key() -> None:
    snap = Snapshot(0, tuple(TEN), TEN[0])
    targets, missing = plan_sessions(G, snap, ("rpc-host", 9000), {TEN[3]: ("h4", 1)})
    assert [t.validator for t in targets] == [TEN[0], TEN[3]]
    assert len(missing) == 3
    assert all(m.startswith('validators."0x') for m in missing)
    assert f'validators."0x{TEN[5].hex()}"' in missing[0]


def test_single_validator_plan_is_the_rpc_validator_at_quic_endpoint() -> None:
    targets, missing = plan_sessions(G, Snapshot(0, (TEN[0],), TEN[0]), ("127.0.0.1", 4433), {})
    assert [(t.validator, t.host, t.port) for t in targets] == [(TEN[0], "127.0.0.1", 4433)] and missing == ()


def test_runner_toml_validators_section(tmp_path: Path) -> None:
    base = render_template("http://127.0.0.1:8545")
    assert parse_settings(base, tmp_path).validator_endpoints == {}
    text = base + f'\n[validators]\n"0x{TEN[1].hex()}" = "10.1.2.3:4433"\n"{TEN[2].hex()}" = "[::1]:5000"\n'
    assert parse_settings(text, tmp_path).validator_endpoints == {TEN[1]: ("10.1.2.3", 4433), TEN[2]: ("::1", 5000)}


@pytest.mark.parametrize(("entry", "key"), [
    ('"0x1234" = "h:1"', "validators.0x1234"),
    (f'"0x{TEN[1].hex()}" = "no-port"', f"validators.0x{TEN[1].hex()}"),
    (f'"0x{TEN[1].hex()}" = 5', f"validators.0x{TEN[1].hex()}"),
])
def test_runner_toml_bad_validator_entries_name_the_key(tmp_path: Path, entry: str, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_settings(render_template("http://127.0.0.1:8545") + f"\n[validators]\n{entry}\n", tmp_path)
    assert e.value.key == key


# -- §5.3 reconfiguration: the plan before, during and after the OVERLAP_BLOCKS window ---------------------------
# E = 0 over v1..v10 (Sub_0(G) = v1, v4, v6, v7, v10); E+1 = 1 over v1..v6, v11, v12 (Sub_1(G) = v1, v4, v6, v11);
# ValidatorSetActivated(1, h = 1000), OVERLAP_BLOCKS = 160 (vectors: tests/unit/protocol/
# test_transport_reconfiguration.py).
V12 = [bytes([i]) * 32 for i in range(1, 13)]
NEW = V12[:6] + V12[10:12]
H_ACT = 1000


def _recfg_status(me: bytes, overlap: int = 160) -> dict[str, Any]:
    def snap(epoch: int, keys: list[bytes]) -> dict[str, Any]:
        return {"subset_epoch": epoch, "validator_set_hash": "0x" + keccak256(b"".join(keys)).hex(),
                "validators": [{"ed25519_public_key": "0x" + k.hex()} for k in keys]}
    status = _status(TEN, me)
    status["reconfiguration"] = {"old": snap(0, TEN), "new": snap(1, NEW), "activation_height": H_ACT,
                                 "overlap_blocks": overlap}
    return status


@pytest.mark.parametrize(("height", "planned"), [
    (H_ACT - 1, [(1, 0), (4, 0), (6, 0), (7, 0), (10, 0)]),  # H < h: Sub_E(R)
    (H_ACT, [(1, 1), (4, 1), (6, 1), (11, 1), (7, 0), (10, 0)]),  # h ≤ H < h + OVERLAP: Sub_E ∪ Sub_{E+1}
    (H_ACT + 159, [(1, 1), (4, 1), (6, 1), (11, 1), (7, 0), (10, 0)]),
    (H_ACT + 160, [(1, 1), (4, 1), (6, 1), (11, 1)]),  # H ≥ h + OVERLAP: the epoch-E-only members dropped
])
def test_plan_holds_the_union_during_the_overlap_then_drops_old_only_members(
        height: int, planned: list[tuple[int, int]]) -> None:
    snap = snapshot_from_status(_recfg_status(TEN[3]))
    endpoints = {v: (f"10.0.0.{v[0]}", 4433) for v in V12}
    targets, missing = plan_sessions(G, snap, ("rpc-host", 9000), endpoints, height=height)
    assert missing == ()
    assert [(t.validator[0], t.snapshot.epoch if t.snapshot else None) for t in targets] == planned
    by_epoch = {0: keccak256(b"".join(TEN)), 1: keccak256(b"".join(NEW))}
    assert all(t.snapshot is not None and t.snapshot.set_hash == by_epoch[t.snapshot.epoch] for t in targets)


def test_the_published_reconfiguration_is_checked() -> None:
    bad = _recfg_status(TEN[3])
    bad["reconfiguration"]["new"]["subset_epoch"] = 2
    with pytest.raises(SnapshotError, match="exactly one"):
        snapshot_from_status(bad)
    bad = _recfg_status(TEN[3])
    bad["reconfiguration"]["new"]["validator_set_hash"] = "0x" + bytes(32).hex()
    with pytest.raises(SnapshotError, match="does not hash"):
        snapshot_from_status(bad)
    with pytest.raises(SnapshotError, match="neither snapshot"):
        snapshot_from_status(_recfg_status(bytes([99]) * 32))
    assert snapshot_from_status(_recfg_status(V12[10])).rpc_validator == V12[10]  # a joining validator's RPC


def test_plan_uses_the_governed_subset_bounds() -> None:
    targets, _ = plan_sessions(G, Snapshot(0, tuple(TEN), TEN[3]), ("rpc-host", 9000),
                               {v: ("h", 1) for v in TEN}, min_subset=2, max_subset=2)
    assert [t.validator[0] for t in targets] == [1, 10]
