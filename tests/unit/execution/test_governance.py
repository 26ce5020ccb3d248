"""CIP-11 governance (§13–§14): GovernanceSetPhase (0x45) / GovernanceSetParam (0x46) rules and activation.

Each rule is exercised through ``execute_transaction`` on a genesis world (ALICE is the system deployer); a
refused change is a failed, charged receipt with its code and *nothing* else in state changes. Activation is the
SystemHooks step of block h applying what is due at h + 1.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution import governance as gov
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.eob.system_hooks import system_hooks
from cowboy_node.execution.system_state import (
    GOVERNANCE,
    get_account,
    get_chain_limits,
    get_cip11_flags,
    get_cip11_params,
    get_runner_config,
    set_cip11_flags,
    set_runner_config,
)
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.account import account_key
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Receipt
from cowboy_protocol.codec import decode
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.instructions import Instruction
from cowboy_protocol.types.params import Cip11Flags
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx, transfer

NOW = 100
BEACON = b"\x11" * 48


class Env:
    """A genesis world in ``phase`` at height NOW; ALICE (system deployer) funds BOB."""

    def __init__(self, phase: int = 0, *, parent_beacon: bytes = BEACON, n_validators: int = 1) -> None:
        self.chain = Chain(MemoryStore(), make_dev_genesis(Cip11Flags.for_phase(phase)).genesis)
        self.world = self.chain.world()
        self.parent_beacon, self.n_validators = parent_beacon, n_validators
        self.height = NOW
        self.ctx = self._ctx()
        self.nonces = {ALICE_SK: 0, BOB_SK: 0}
        assert self.run_tx(ALICE_SK, None).status == STATUS_SUCCESS

    def _ctx(self) -> BlockContext:
        return begin_block(self.world, BlockEnv(
            chain_id=CHAIN_ID, height=self.height, timestamp_ms=1, fee_recipient=FEE_RECIPIENT, beacon=BEACON,
            parent_beacon=self.parent_beacon, n_validators=self.n_validators))

    def run_tx(self, sk: bytes, ins: Instruction | None) -> Receipt:
        n = self.nonces[sk]
        self.nonces[sk] += 1
        tx = transfer(sk, n, BOB, 10**21) if ins is None else make_tx(sk, n, ins)
        return execute_transaction(self.world, tx, self.ctx)

    def run(self, ins: Instruction, sk: bytes = ALICE_SK) -> Receipt:
        return self.run_tx(sk, ins)

    def advance_to(self, height: int) -> None:
        """Run the SystemHooks of every block up to ``height − 1`` (the next block then starts at ``height``)."""
        while self.height < height:
            system_hooks(self.world, self.ctx)
            self.height += 1
            self.ctx = self._ctx()


def _refused(env: Env, ins: Instruction, code: str, sk: bytes = ALICE_SK) -> Receipt:
    """Run ``ins``; assert a failed receipt with ``code`` and that only the sender's account changed."""
    sender = ALICE if sk == ALICE_SK else BOB
    before = dict(env.world.changes())
    balance = get_account(env.world, sender).balance
    r = env.run(ins, sk)
    assert (r.status, r.error_code) == (STATUS_FAILED, code), r
    assert r.events == () and r.fee_paid > 0
    assert get_account(env.world, sender).balance == balance - r.fee_paid
    after = env.world.changes()
    assert {k for k in after.keys() | before.keys() if before.get(k) != after.get(k)} == {account_key(sender)}
    return r


def _ok(env: Env, ins: Instruction) -> Receipt:
    r = env.run(ins)
    assert (r.status, r.error_code) == (STATUS_SUCCESS, None), r
    return r


# -- scheduling and activation ---------------------------------------------------------------------------
def test_phase_change_is_pending_until_its_height_then_activated_by_system_hooks() -> None:
    env = Env(0)
    r = _ok(env, GovernanceSetPhase(1, NOW + 5))
    [ev] = r.events
    assert (ev.emitter, ev.topic) == (GOVERNANCE, gov.TOPIC_SCHEDULED)
    assert decode(ev.data) == {0: NOW + 5, 1: "PHASE", 2: 1, 3: NOW}
    assert get_cip11_flags(env.world).phase() == 0
    view = gov.governance_view(env.world)
    assert view["active"]["phase"] == 0 and view["pending"] == [
        {"activation_height": NOW + 5, "name": "PHASE", "value": 1, "scheduled_at": NOW}]
    env.advance_to(NOW + 4)
    assert get_cip11_flags(env.world).phase() == 0 and env.ctx.flags.phase() == 0
    env.advance_to(NOW + 5)  # SystemHooks of NOW + 4 applied it: block NOW + 5 starts in phase 1
    assert get_cip11_flags(env.world) == Cip11Flags.for_phase(1) and env.ctx.flags.phase() == 1
    assert gov.get_pending(env.world) == []
    assert env.world.get(gov.KEY_GOVERNANCE_PENDING) is None


def test_activation_event_is_a_block_event() -> None:
    env = Env(0)
    _ok(env, GovernanceSetParam("OVERLAP_BLOCKS", 320, NOW + 1))
    system_hooks(env.world, env.ctx)
    [ev] = [e for e in env.ctx.events if getattr(e, "topic", "") == gov.TOPIC_ACTIVATED]
    assert decode(ev.data) == {0: NOW + 1, 1: "OVERLAP_BLOCKS", 2: 320, 3: NOW}
    assert get_cip11_params(env.world).OVERLAP_BLOCKS == 320


def test_params_land_in_their_configs() -> None:
    env = Env(3)
    for name, value in [("MRU_TTL_BLOCKS", 640), ("MRU_WEIGHT_MULTIPLIER", 2), ("SELECTION_SEED_DELAY_VIEWS", 5),
                        ("HEARTBEAT_TIMEOUT_BLOCKS", 300), ("ACK_TIMEOUT_BLOCKS", 20), ("runner.max_job_retries", 5)]:
        _ok(env, GovernanceSetParam(name, value, NOW + 2))
    env.advance_to(NOW + 2)
    cfg = get_runner_config(env.world)
    assert (cfg.mru_ttl_blocks, cfg.mru_weight_multiplier, cfg.selection_seed_delay_views, cfg.max_job_retries) == \
        (640, 2, 5, 5)
    assert get_chain_limits(env.world).heartbeat_timeout_blocks == 300 == env.ctx.limits.heartbeat_timeout_blocks
    assert get_cip11_params(env.world).ACK_TIMEOUT_BLOCKS == 20


# -- bad input: failed receipt, typed code, state unchanged ----------------------------------------------
def test_non_governance_sender_is_refused() -> None:
    env = Env(0)
    _refused(env, GovernanceSetPhase(1, NOW + 5), "unauthorized", sk=BOB_SK)
    _refused(env, GovernanceSetParam("OVERLAP_BLOCKS", 200, NOW + 5), "unauthorized", sk=BOB_SK)


@pytest.mark.parametrize("height", [0, NOW - 1, NOW])
def test_activation_height_not_in_the_future_is_refused(height: int) -> None:
    env = Env(0)
    _refused(env, GovernanceSetPhase(1, height), gov.E_ACTIVATION_NOT_FUTURE)
    _refused(env, GovernanceSetParam("OVERLAP_BLOCKS", 200, height), gov.E_ACTIVATION_NOT_FUTURE)


def test_activation_before_a_pending_change_is_refused() -> None:
    env = Env(0)
    _ok(env, GovernanceSetPhase(1, NOW + 10))
    _refused(env, GovernanceSetParam("OVERLAP_BLOCKS", 200, NOW + 9), gov.E_ACTIVATION_OUT_OF_ORDER)
    _ok(env, GovernanceSetParam("OVERLAP_BLOCKS", 200, NOW + 10))  # same height: applied in scheduling order


def test_pending_queue_is_bounded() -> None:
    env = Env(0)
    for i in range(gov.MAX_PENDING):
        _ok(env, GovernanceSetParam("OVERLAP_BLOCKS", 200 + i, NOW + 1))
    _refused(env, GovernanceSetParam("OVERLAP_BLOCKS", 1, NOW + 1), gov.E_TOO_MANY_PENDING)


@pytest.mark.parametrize("start,target", [(0, 2), (0, 3), (1, 3), (0, 0), (2, 2), (3, 1), (3, 0), (2, 0)])
def test_out_of_order_phase_flip_is_refused(start: int, target: int) -> None:
    _refused(Env(start), GovernanceSetPhase(target, NOW + 1), gov.E_PHASE_OUT_OF_ORDER)


def test_phase_above_3_is_refused() -> None:
    _refused(Env(3), GovernanceSetPhase(4, NOW + 1), gov.E_INVALID_PHASE)


def test_order_is_checked_against_the_pending_phase_not_the_active_one() -> None:
    env = Env(0)
    _ok(env, GovernanceSetPhase(1, NOW + 5))
    _refused(env, GovernanceSetPhase(1, NOW + 6), gov.E_PHASE_OUT_OF_ORDER)  # phase will already be 1
    _ok(env, GovernanceSetPhase(2, NOW + 6))
    _ok(env, GovernanceSetPhase(3, NOW + 7))
    env.advance_to(NOW + 7)
    assert get_cip11_flags(env.world) == Cip11Flags.for_phase(3)


@pytest.mark.parametrize("start", [1, 2, 3])
def test_one_step_back_is_allowed(start: int) -> None:
    env = Env(start)
    _ok(env, GovernanceSetPhase(start - 1, NOW + 1))
    env.advance_to(NOW + 1)
    assert get_cip11_flags(env.world) == Cip11Flags.for_phase(start - 1)


def test_present_first_needs_a_genesis_beacon() -> None:
    _refused(Env(1, parent_beacon=b""), GovernanceSetPhase(2, NOW + 1), gov.E_MISSING_GENESIS_BEACON)


def test_present_first_needs_the_seed_delay_invariant() -> None:
    env = Env(1)
    set_runner_config(env.world, replace(get_runner_config(env.world), selection_seed_delay_views=1))
    _refused(env, GovernanceSetPhase(2, NOW + 1), gov.E_SEED_DELAY_INVARIANT)
    _ok(env, GovernanceSetParam("SELECTION_SEED_DELAY_VIEWS", 3, NOW + 1))  # raise K first …
    _ok(env, GovernanceSetPhase(2, NOW + 2))                                # … then the flip passes


@pytest.mark.parametrize("name,value", [
    ("OVERLAP_BLOCKS", 0), ("MRU_WEIGHT_MULTIPLIER", 0), ("MRU_WEIGHT_MULTIPLIER", 65),
    ("HEARTBEAT_TIMEOUT_BLOCKS", 19), ("SELECTION_SEED_DELAY_VIEWS", 1_001), ("runner.slash_permille", 1_001),
    ("PRESENCE_HARD_EXCLUDE_ENABLED", 2), ("K_HARD_MIN", 19), ("runner.commit_phase_permille", 1_000),
])
def test_out_of_range_value_is_refused(name: str, value: int) -> None:
    _refused(Env(3), GovernanceSetParam(name, value, NOW + 1), gov.E_OUT_OF_RANGE)


def test_unknown_or_reserved_name_is_refused() -> None:
    env = Env(3)
    for name in ("NOPE", "t_route", "MAX_FRAME_BYTES", "CIP11_POLL_DISABLED", "runner.mru_ttl_blocks", "PHASE"):
        _refused(env, GovernanceSetParam(name, 1, NOW + 1), gov.E_UNKNOWN_PARAM)


def test_upward_only_constants_cannot_be_lowered() -> None:
    env = Env(3)
    _refused(env, GovernanceSetParam("SELECTION_SEED_DELAY_VIEWS", 2, NOW + 1), gov.E_NOT_UPWARD)
    _ok(env, GovernanceSetParam("K_HARD_MIN", 30, NOW + 1))
    _refused(env, GovernanceSetParam("K_HARD_MIN", 25, NOW + 2), gov.E_NOT_UPWARD)  # against the pending 30


def test_heartbeat_timeout_widens_only_in_phase_3() -> None:
    _refused(Env(2), GovernanceSetParam("HEARTBEAT_TIMEOUT_BLOCKS", 200, NOW + 1), gov.E_REQUIRES_PHASE)
    _ok(Env(2), GovernanceSetParam("HEARTBEAT_TIMEOUT_BLOCKS", 50, NOW + 1))  # narrowing is fine
    _ok(Env(3), GovernanceSetParam("HEARTBEAT_TIMEOUT_BLOCKS", 200, NOW + 1))


def test_shadow_flag_only_in_phase_1() -> None:
    _refused(Env(2), GovernanceSetParam("CIP11_PRESENCE_SHADOW_ENABLED", 0, NOW + 1), gov.E_REQUIRES_PHASE)
    env = Env(1)
    _ok(env, GovernanceSetParam("CIP11_PRESENCE_SHADOW_ENABLED", 0, NOW + 1))
    env.advance_to(NOW + 1)
    assert get_cip11_flags(env.world) == replace(Cip11Flags.for_phase(1), CIP11_PRESENCE_SHADOW_ENABLED=False)


def test_mode_a_needs_phase_3_and_the_k_hard_min_guard() -> None:
    _refused(Env(2), GovernanceSetParam("PRESENCE_HARD_EXCLUDE_ENABLED", 1, NOW + 1), gov.E_REQUIRES_PHASE)
    # One validator: effective_k = 1 < K_HARD_MIN = 20 — the guard can never hold on a single validator.
    _refused(Env(3), GovernanceSetParam("PRESENCE_HARD_EXCLUDE_ENABLED", 1, NOW + 1), gov.E_MODE_A_GUARD)
    env = Env(3, n_validators=2**20)
    _ok(env, GovernanceSetParam("MAX_SUBSET", 32, NOW + 1))
    _refused(env, GovernanceSetParam("PRESENCE_HARD_EXCLUDE_ENABLED", 1, NOW + 1), gov.E_MODE_A_GUARD)  # T_HARD 0
    _ok(env, GovernanceSetParam("T_HARD", 11, NOW + 1))  # effective_k = 21 → needs t_hard ≥ 11
    _ok(env, GovernanceSetParam("PRESENCE_HARD_EXCLUDE_ENABLED", 1, NOW + 1))
    _refused(env, GovernanceSetParam("K_HARD_MIN", 22, NOW + 1), gov.E_MODE_A_GUARD)  # would break the guard
    _refused(env, GovernanceSetPhase(2, NOW + 1), gov.E_MODE_A_ENABLED)
    env.advance_to(NOW + 1)
    assert get_cip11_flags(env.world).PRESENCE_HARD_EXCLUDE_ENABLED


def test_cross_field_rule_is_invalid_config() -> None:
    _refused(Env(0), GovernanceSetParam("MIN_SUBSET", 9, NOW + 1), gov.E_INVALID_CONFIG)  # MIN_SUBSET > MAX_SUBSET
    _refused(Env(0), GovernanceSetParam("runner.payment_burn_permille", 200, NOW + 1), gov.E_INVALID_CONFIG)


def test_change_that_no_longer_holds_at_activation_is_dropped_with_an_event() -> None:
    env = Env(1)
    _ok(env, GovernanceSetPhase(2, NOW + 1))
    set_cip11_flags(env.world, Cip11Flags.for_phase(0))  # state moved under it (not reachable by governance)
    system_hooks(env.world, env.ctx)
    [ev] = [e for e in env.ctx.events if getattr(e, "topic", "") == gov.TOPIC_DROPPED]
    assert decode(ev.data)[4] == gov.E_PHASE_OUT_OF_ORDER
    assert get_cip11_flags(env.world) == Cip11Flags.for_phase(0) and gov.get_pending(env.world) == []


def test_every_governed_name_has_bounds_within_u64_and_a_valid_default() -> None:
    s = gov.read_settings(Env(0).world)
    for p in gov.PARAMS.values():
        assert 0 <= p.lo <= p.hi < 2**64
        assert p.lo <= p.get(s) <= p.hi, p.name
