"""CIP-11 Mode A in selection (§8.3 point 3, §8.4): PresenceInput(H) from parent-state proofs and hard exclusion,
only when the §8.4 guard holds; below it nothing is excluded, and a block that excludes anyway is invalid.

The worlds are those of ``test_mode_a_certificates`` (21 validators, k = 20, T_HARD = 11 for the guard; the
default subset bounds, k = 6, for the guard-false cases). Blocks run through ``build_block`` / ``execute_block``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cowboy_node.execution import block as block_mod
from cowboy_node.execution import presence_certificates as pc
from cowboy_node.execution.block import BlockResult, build_block, execute_block, start_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.jobs.job_record import JobRecord, job_key
from cowboy_node.execution.runners.registry_state import get_runner
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.types.block import BlockHeader, Round
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.job_instructions import JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.params import Cip11Params
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE_SK, make_tx
from tests.unit.execution.test_mode_a_certificates import H0, RUNNER_SKS, RUNNERS, World, accepted, good

EXAMPLES = Path(__file__).resolve().parents[4] / "configs" / "examples"
GUARD_FALSE = Cip11Params(T_HARD=11)  # flag set, default MIN/MAX_SUBSET: effective_k = 6 < K_HARD_MIN


def _jobs(n: int, nonce0: int = 0) -> list[Transaction]:
    doc = json.loads((EXAMPLES / "job-http.json").read_text())
    ins = JobSubmit(parse_job_request_json(doc))
    return [make_tx(ALICE_SK, nonce0 + i, ins, cycles_limit=5_000_000, cells_limit=200_000) for i in range(n)]


def _env(height: int, presence: bytes | None) -> BlockEnv:
    return BlockEnv(chain_id="cowboy-test-1", height=height, timestamp_ms=1, fee_recipient=b"\x01" * 20,
                    beacon=b"\x11" * 48, parent_beacon=b"\x11" * 48, presence_input=presence, n_validators=21)


def _committees(w: World, result: BlockResult) -> list[tuple[bytes, ...]]:
    out = []
    for tx in result.transactions:
        raw = w.world.get(job_key(derive_job_id(tx.tx_hash(), 0)))
        assert raw is not None
        out.append(JobRecord.decode(raw).committee)
    return out


def _index(w: World, runner: bytes) -> int:
    rec = get_runner(w.world, runner)
    assert rec is not None
    return rec.index


ALL_PRESENT = encode_presence(range(3), 3)


def test_effective_mode_a_presence_comes_from_parent_state_proofs_and_unproven_runners_are_excluded() -> None:
    w = World()
    accepted(w, good(height=H0))  # runner 0 proven until H0 + 60
    ctx = start_block(w.world, _env(H0 + 1, ALL_PRESENT))
    assert ctx.hard_exclude
    assert ctx.present == {_index(w, RUNNERS[0])}  # the proposer's field (all three present) is ignored
    result = build_block(w.world, _env(H0 + 1, ALL_PRESENT), _jobs(8))
    committees = _committees(w, result)
    # runner 0 until its max_concurrent_jobs is reached, then nobody: the other two are never drawn
    assert committees[0] == (RUNNERS[0],)
    assert set(committees) == {(RUNNERS[0],), ()}


def test_effective_mode_a_presence_ends_at_proven_until() -> None:
    w = World()
    accepted(w, good(height=H0))
    assert pc.derive_presence(w.world, H0 + 60) == {_index(w, RUNNERS[0])}
    assert pc.derive_presence(w.world, H0 + 61) == frozenset()
    result = build_block(w.world, _env(H0 + 61, ALL_PRESENT), _jobs(3))
    assert _committees(w, result) == [()] * 3  # nobody proven: under-filled, never a fallback draw


def test_flag_set_but_guard_false_excludes_nobody() -> None:
    w = World(params=GUARD_FALSE)
    assert w.ctx.flags.PRESENCE_HARD_EXCLUDE_ENABLED
    ctx = start_block(w.world, _env(H0 + 1, encode_presence((), 3)))
    assert not ctx.hard_exclude and ctx.present == frozenset()
    result = build_block(w.world, _env(H0 + 1, encode_presence((), 3)), _jobs(12))
    chosen = {c for committee in _committees(w, result) for c in committee}
    assert chosen and chosen <= set(RUNNERS)  # every job got a runner though none holds a presence proof
    assert len(chosen) > 1  # and not one runner's monopoly: the fallback pool is the whole eligible set


def _header(result: BlockResult, height: int, presence: bytes | None) -> BlockHeader:
    return BlockHeader(chain_id="cowboy-test-1", height=height, parent_hash=b"\x00" * 32, round=Round(0, height),
                       timestamp_ms=1, proposer=b"\x00" * 32, tx_root=result.tx_root, state_root=result.state_root,
                       receipts_root=result.receipts_root, beacon=b"\x11" * 48, presence_input=presence,
                       consumed_seeds=(), cycles_used=result.cycles_used, cells_used=result.cells_used,
                       cycle_basefee=result.cycle_basefee, cell_basefee=result.cell_basefee)


def test_a_block_applying_hard_exclusion_under_a_false_guard_is_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    presence = encode_presence((), 3)
    honest, verifier = World(params=GUARD_FALSE), World(params=GUARD_FALSE)
    # control: an honest proposer's block verifies
    ok = build_block(honest.world, _env(H0 + 1, presence), _jobs(2))
    execute_block(World(params=GUARD_FALSE).world, _env(H0 + 1, presence), _header(ok, H0 + 1, presence),
                  ok.transactions)
    # a proposer that hard-excludes although the guard is false
    cheat = World(params=GUARD_FALSE)
    with monkeypatch.context() as m:
        m.setattr(block_mod, "mode_a_active", lambda *a, **k: True)
        bad = build_block(cheat.world, _env(H0 + 1, presence), _jobs(2))
    assert _committees(cheat, bad) == [(), ()]
    with pytest.raises(InvalidBlock) as e:
        execute_block(verifier.world, _env(H0 + 1, presence), _header(bad, H0 + 1, presence), bad.transactions)
    assert e.value.code in {"state_root_mismatch", "receipts_root_mismatch"}


def test_under_an_effective_guard_every_node_derives_the_same_exclusion() -> None:
    a, b = World(), World()
    for w in (a, b):
        accepted(w, good(height=H0))
    presence = encode_presence(range(3), 3)
    built = build_block(a.world, _env(H0 + 1, presence), _jobs(2))
    # a verifier whose proposer field differs still derives PresenceInput from state: same block, same roots
    execute_block(b.world, _env(H0 + 1, None), _header(built, H0 + 1, None), built.transactions)


def test_mode_a_effective_m_gt_1_committees_use_presence_despite_the_membership_bound() -> None:
    w = World()
    for sk in RUNNER_SKS[:2]:
        accepted(w, good(sk=sk, height=H0), sk=sk)
    ctx = start_block(w.world, _env(H0 + 1, None))
    from cowboy_node.execution.jobs.dispatch import present_set
    assert present_set(ctx, 3) == {_index(w, RUNNERS[0]), _index(w, RUNNERS[1])}
    ctx_b = replace(ctx, hard_exclude=False)
    assert present_set(ctx_b, 3) == frozenset()  # Mode B with n > 1 and M > 1: membership over the full set
    assert private_key_to_address(RUNNER_SKS[2]) == RUNNERS[2]
