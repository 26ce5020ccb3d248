"""CIP-11 governance (§13–§14): scheduled rollout-phase and parameter changes, their rules and activation.

A GovernanceSetPhase / GovernanceSetParam transaction (system instruction, sender ∈ ``system_deployers``)
does not change a parameter: it appends a :class:`PendingChange` to the pending queue (one state key), after
checking it against the settings the chain *will* have at its activation height (the active values with every
earlier pending change applied). The SystemHooks step of block ``H − 1`` applies the changes due at ``H``, so
block ``H`` — its proposer, its PresenceInput rule, its selection — runs entirely under the new values.

Rules (docs/operations.md "Governance"; every failure is a failed receipt with the code and nothing stored):

- ``activation_not_future``: ``activation_height`` ≤ the height of the including block.
- ``activation_out_of_order``: below the activation height of a change already pending (the queue is
  kept in activation order, so the settings a change is checked against are the ones it will meet).
- ``too_many_pending``: :data:`MAX_PENDING` changes are already queued.
- ``invalid_phase`` (phase > 3), ``phase_out_of_order``: phases move one step at a time, forward 0→1→2→3 or
  back one step (each step flips exactly one §14 phase flag, so the nesting the phases rely on always holds).
- ``missing_genesis_beacon`` (1→2): §9.2 "Activating CIP-11 selection (CIP11_PRESENT_FIRST_ENABLED) on a chain
  whose configuration lacks a genesis beacon is invalid" — checked as: the block's parent beacon is a 48-byte
  threshold signature (the M == 1 path is total).
- ``seed_delay_invariant`` (1→2): §13 "governance MUST raise K … before enabling M > 1 CIP-11 selection" —
  ``SELECTION_SEED_DELAY_VIEWS`` must be at least :data:`SEED_DELAY_MIN_VIEWS`.
- ``mode_a_enabled`` (3→2 while PRESENCE_HARD_EXCLUDE_ENABLED): Mode A belongs to phase 3.
- ``unknown_param``, ``param_out_of_range`` (per-parameter bounds), ``param_not_upward`` (§13 "Governance-tunable
  (upward)" for SELECTION_SEED_DELAY_VIEWS, "lowering requires a successor CIP" for K_HARD_MIN),
  ``requires_phase`` (widening HEARTBEAT_TIMEOUT_BLOCKS: §14 Phase 3 "Governance MAY widen
  HEARTBEAT_TIMEOUT_BLOCKS"; the shadow flag only in phase 1; Mode A only in phase 3),
  ``mode_a_guard_unmet`` (§8.4 "governance MUST satisfy the K_HARD_MIN guard"), ``invalid_config`` (a
  cross-field rule of the config the value lands in).

A change that no longer passes its rules when it activates (cannot happen with the queue kept in order, kept as
a guard) is dropped with a ``governance.dropped`` event instead of applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.jobs.selection import mode_a_effective
from cowboy_node.execution.system_state import (
    GOVERNANCE,
    KEY_GOVERNANCE_PENDING,
    get_chain_limits,
    get_cip11_flags,
    get_cip11_params,
    get_runner_config,
    set_chain_limits,
    set_cip11_flags,
    set_cip11_params,
    set_runner_config,
)
from cowboy_node.execution.validator_governance import get_approval_nonce, quorum, validator_count
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import U64_MAX, expect_map, expect_text, expect_uint
from cowboy_protocol.types.params import ChainLimits, Cip11Flags, Cip11Params, RunnerConfig
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

PHASE = "PHASE"
"""Target name a GovernanceSetPhase is stored under in the pending queue."""
MAX_PENDING = 32
"""Most changes the pending queue holds."""
SEED_DELAY_MIN_VIEWS = 3
"""Smallest SELECTION_SEED_DELAY_VIEWS present-first selection may be enabled with: the §13 launch value, the
delay this node's Simplex pipeline was shown to satisfy (block S finalized before the seed of
advance_round(r_submit, K) can be revealed, docs/selection.md)."""
HEARTBEAT_TIMEOUT_MIN_BLOCKS = 20
"""Floor of HEARTBEAT_TIMEOUT_BLOCKS: twice the runner daemon's 10-block on-chain heartbeat cadence, the §6.6
"floor-safety margin before staleness"."""
GENESIS_BEACON_LEN = 48

TOPIC_SCHEDULED = "governance.scheduled"
TOPIC_ACTIVATED = "governance.activated"
TOPIC_DROPPED = "governance.dropped"

E_ACTIVATION_NOT_FUTURE = "activation_not_future"
E_ACTIVATION_OUT_OF_ORDER = "activation_out_of_order"
E_TOO_MANY_PENDING = "too_many_pending"
E_INVALID_PHASE = "invalid_phase"
E_PHASE_OUT_OF_ORDER = "phase_out_of_order"
E_MISSING_GENESIS_BEACON = "missing_genesis_beacon"
E_SEED_DELAY_INVARIANT = "seed_delay_invariant"
E_MODE_A_ENABLED = "mode_a_enabled"
E_UNKNOWN_PARAM = "unknown_param"
E_OUT_OF_RANGE = "param_out_of_range"
E_NOT_UPWARD = "param_not_upward"
E_REQUIRES_PHASE = "requires_phase"
E_MODE_A_GUARD = "mode_a_guard_unmet"
E_INVALID_CONFIG = "invalid_config"


@dataclass(frozen=True, slots=True)
class Settings:
    """Every value CIP-11 governance can change, as one value."""

    flags: Cip11Flags
    limits: ChainLimits
    runners: RunnerConfig
    params: Cip11Params


def read_settings(world: WorldState) -> Settings:
    """The active settings."""
    return Settings(get_cip11_flags(world), get_chain_limits(world), get_runner_config(world),
                    get_cip11_params(world))


def write_settings(world: WorldState, before: Settings, after: Settings) -> None:
    """Store the parts of ``after`` that differ from ``before`` (an untouched config keeps its key as is)."""
    if after.flags != before.flags:
        set_cip11_flags(world, after.flags)
    if after.limits != before.limits:
        set_chain_limits(world, after.limits)
    if after.runners != before.runners:
        set_runner_config(world, after.runners)
    if after.params != before.params:
        set_cip11_params(world, after.params)


@dataclass(frozen=True, slots=True)
class PendingChange:
    """One scheduled change: ``{0: activation_height, 1: name, 2: value, 3: scheduled_at}``."""

    activation_height: int
    name: str
    """:data:`PHASE` or a parameter name of :data:`PARAMS`."""
    value: int
    scheduled_at: int
    """Height of the block that scheduled it."""

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {0: self.activation_height, 1: self.name, 2: self.value, 3: self.scheduled_at}

    @classmethod
    def from_cbor(cls, value: object) -> PendingChange:
        """Decode the canonical map."""
        m = expect_map(value, frozenset(range(4)), "PendingChange")
        return cls(activation_height=expect_uint(m[0], "activation_height"), name=expect_text(m[1], "name", 64),
                   value=expect_uint(m[2], "value"), scheduled_at=expect_uint(m[3], "scheduled_at"))

    def to_json(self) -> dict[str, Any]:
        """JSON view (``query governance``)."""
        return {"activation_height": self.activation_height, "name": self.name, "value": self.value,
                "scheduled_at": self.scheduled_at}


def get_pending(world: WorldState) -> list[PendingChange]:
    """The pending queue, in activation order (ties: scheduling order)."""
    raw = world.get(KEY_GOVERNANCE_PENDING)
    if raw is None:
        return []
    value = decode(raw)
    if not isinstance(value, list):
        raise DecodeError("governance pending: expected an array")
    return [PendingChange.from_cbor(v) for v in value]


def set_pending(world: WorldState, pending: list[PendingChange]) -> int:
    """Store the queue (delete the key when empty); returns the bytes written."""
    if not pending:
        world.delete(KEY_GOVERNANCE_PENDING)
        return 0
    raw = encode([p.to_cbor() for p in pending])
    world.set(KEY_GOVERNANCE_PENDING, raw)
    return len(KEY_GOVERNANCE_PENDING) + len(raw)


# -- parameters ------------------------------------------------------------------------------------------
Check = Callable[[Settings, Settings, BlockEnv], None]
"""Extra rule of a parameter: ``(before, after, env)``; raises TxFailed."""


@dataclass(frozen=True, slots=True)
class Param:
    """A governed parameter: where it lives, its bounds and its extra rule."""

    name: str
    component: str
    """``flags`` | ``limits`` | ``runners`` | ``params``: the Settings field holding it."""
    attr: str
    """Field name in that config."""
    lo: int
    hi: int
    upward_only: bool = False
    check: Check | None = None

    def get(self, s: Settings) -> int:
        """Current value (booleans as 0/1)."""
        return int(getattr(getattr(s, self.component), self.attr))

    def put(self, s: Settings, value: int) -> Settings:
        """``s`` with this parameter set to ``value``."""
        cfg = getattr(s, self.component)
        new: object = bool(value) if self.component == "flags" else value
        return replace(s, **{self.component: replace(cfg, **{self.attr: new})})


def _widen_heartbeat_in_phase_3(before: Settings, after: Settings, env: BlockEnv) -> None:
    if after.limits.heartbeat_timeout_blocks > before.limits.heartbeat_timeout_blocks and before.flags.phase() < 3:
        raise TxFailed(E_REQUIRES_PHASE, "HEARTBEAT_TIMEOUT_BLOCKS may only be widened in phase 3 (§14: push/ack "
                       "must provide the fast-liveness signal first)")


def _shadow_in_phase_1(before: Settings, after: Settings, env: BlockEnv) -> None:
    if before.flags.phase() != 1:
        raise TxFailed(E_REQUIRES_PHASE, "CIP11_PRESENCE_SHADOW_ENABLED is a phase-1 option (§14 Phase 1)")


def _mode_a_in_phase_3(before: Settings, after: Settings, env: BlockEnv) -> None:
    if after.flags.PRESENCE_HARD_EXCLUDE_ENABLED and before.flags.phase() < 3:
        raise TxFailed(E_REQUIRES_PHASE, "PRESENCE_HARD_EXCLUDE_ENABLED (Mode A) is a phase-3 step (§14 Phase 3)")


def _runner_param(name: str, attr: str, lo: int, hi: int, *, upward_only: bool = False) -> Param:
    return Param(name, "runners", attr, lo, hi, upward_only)


_REP_MAX = 1_000 * 10**9
_CIP11_RUNNER_NAMES = {"mru_ttl_blocks": "MRU_TTL_BLOCKS", "mru_weight_multiplier": "MRU_WEIGHT_MULTIPLIER",
                       "selection_seed_delay_views": "SELECTION_SEED_DELAY_VIEWS",
                       "min_runner_stake": "MIN_STAKE_CBY_WEI"}
_RUNNER_BOUNDS: dict[str, tuple[int, int]] = {
    "min_runner_stake": (1, U64_MAX), "unbonding_blocks": (1, 10_000_000),
    "initial_reputation_x1e9": (0, _REP_MAX), "min_reputation_x1e9": (0, _REP_MAX),
    "max_reputation_x1e9": (1, _REP_MAX), "reputation_normalizer_x1e9": (1, _REP_MAX),
    "w_min_floor_x1e6": (0, 1_000_000), "reputation_reward_x1e9": (0, _REP_MAX),
    "reputation_timeout_penalty_x1e9": (0, _REP_MAX), "reputation_slash_penalty_x1e9": (0, _REP_MAX),
    "slash_permille": (0, 1_000), "mru_ttl_blocks": (1, 1_000_000), "mru_weight_multiplier": (1, 64),
    "selection_seed_delay_views": (1, 1_000), "max_job_retries": (0, 100), "commit_phase_permille": (1, 999),
    "payment_runner_permille": (0, 1_000), "payment_burn_permille": (0, 1_000),
    "max_active_runners": (1, 10_000_000),
}
_RUNNER_UPWARD = {"selection_seed_delay_views", "max_active_runners"}


def _build_params() -> dict[str, Param]:
    out: list[Param] = [
        Param("CIP11_PRESENCE_SHADOW_ENABLED", "flags", "CIP11_PRESENCE_SHADOW_ENABLED", 0, 1,
              check=_shadow_in_phase_1),
        Param("PRESENCE_HARD_EXCLUDE_ENABLED", "flags", "PRESENCE_HARD_EXCLUDE_ENABLED", 0, 1,
              check=_mode_a_in_phase_3),
        Param("HEARTBEAT_TIMEOUT_BLOCKS", "limits", "heartbeat_timeout_blocks", HEARTBEAT_TIMEOUT_MIN_BLOCKS, 100_000,
              check=_widen_heartbeat_in_phase_3),
    ]
    for f in fields(RunnerConfig):
        lo, hi = _RUNNER_BOUNDS[f.name]
        name = _CIP11_RUNNER_NAMES.get(f.name, "runner." + f.name)
        out.append(_runner_param(name, f.name, lo, hi, upward_only=f.name in _RUNNER_UPWARD))
    bounds = {"MIN_SUBSET": (1, 64), "MAX_SUBSET": (1, 1_024), "K_HARD_MIN": (20, 1_024), "T_HARD": (0, 1_024),
              "RESULT_TX_INCLUSION_GRACE_BLOCKS": (1, 100), "RESULT_TX_REBROADCAST_INTERVAL_BLOCKS": (1, 100),
              "HEARTBEAT_BLOCKS": (1, 60), "PRESENCE_TIMEOUT_BLOCKS": (2, 1_000), "ACK_TIMEOUT_BLOCKS": (1, 1_000),
              "RECEIPT_FRESHNESS_BLOCKS": (1, 10_000), "PRESENCE_PROOF_TTL_BLOCKS": (1, 100_000),
              "OVERLAP_BLOCKS": (1, 100_000)}
    for f in fields(Cip11Params):
        lo, hi = bounds[f.name]
        out.append(Param(f.name, "params", f.name, lo, hi, upward_only=f.name == "K_HARD_MIN"))
    return {p.name: p for p in out}


PARAMS: dict[str, Param] = _build_params()
"""Every name GovernanceSetParam accepts, in table order."""


# -- rules -----------------------------------------------------------------------------------------------
def _phase_step(s: Settings, target: int, env: BlockEnv) -> Settings:
    if target > 3:
        raise TxFailed(E_INVALID_PHASE, f"phase must be 0..3, got {target}")
    cur = s.flags.phase()
    if abs(target - cur) != 1:
        raise TxFailed(E_PHASE_OUT_OF_ORDER, f"phase {cur} → {target}: phases move one step at a time "
                       "(0→1→2→3, or back one step)")
    if cur == 1 and target == 2:
        if len(env.parent_beacon) != GENESIS_BEACON_LEN:
            raise TxFailed(E_MISSING_GENESIS_BEACON, "present-first selection needs a consensus genesis beacon "
                           "(§9.2): this chain's parent beacon is not a 48-byte threshold signature")
        if s.runners.selection_seed_delay_views < SEED_DELAY_MIN_VIEWS:
            raise TxFailed(E_SEED_DELAY_INVARIANT, f"SELECTION_SEED_DELAY_VIEWS is "
                           f"{s.runners.selection_seed_delay_views}; enabling M > 1 CIP-11 selection needs at least "
                           f"{SEED_DELAY_MIN_VIEWS} (§13)")
    if cur == 3 and s.flags.PRESENCE_HARD_EXCLUDE_ENABLED:
        raise TxFailed(E_MODE_A_ENABLED, "disable PRESENCE_HARD_EXCLUDE_ENABLED before leaving phase 3")
    flags = replace(Cip11Flags.for_phase(target),
                    PRESENCE_HARD_EXCLUDE_ENABLED=s.flags.PRESENCE_HARD_EXCLUDE_ENABLED)
    return replace(s, flags=flags)


def _param_change(s: Settings, name: str, value: int, env: BlockEnv) -> Settings:
    p = PARAMS.get(name)
    if p is None:
        raise TxFailed(E_UNKNOWN_PARAM, f"no governed parameter named {name!r}")
    if not p.lo <= value <= p.hi:
        raise TxFailed(E_OUT_OF_RANGE, f"{name} must be in {p.lo}..{p.hi}, got {value}")
    if p.upward_only and value < p.get(s):
        raise TxFailed(E_NOT_UPWARD, f"{name} may only be raised (current {p.get(s)}, proposed {value})")
    after = p.put(s, value)
    if p.check is not None:
        p.check(s, after, env)
    for cfg in (after.limits, after.runners, after.params):
        try:
            cfg.validate()
        except ValidationError as e:
            raise TxFailed(E_INVALID_CONFIG, e.message) from None
    return after


def apply_change(s: Settings, change: PendingChange, env: BlockEnv) -> Settings:
    """``s`` after ``change``, or TxFailed with the rule it breaks (module docstring)."""
    after = (_phase_step(s, change.value, env) if change.name == PHASE
             else _param_change(s, change.name, change.value, env))
    if after.flags.PRESENCE_HARD_EXCLUDE_ENABLED and not mode_a_effective(
            after.flags, env.n_validators, after.params.T_HARD, min_subset=after.params.MIN_SUBSET,
            max_subset=after.params.MAX_SUBSET, k_hard_min=after.params.K_HARD_MIN):
        raise TxFailed(E_MODE_A_GUARD, "Mode A needs effective_k ≥ K_HARD_MIN and T_HARD ≥ effective_k/2 + 1 "
                       f"(§8.4) with {env.n_validators} validator(s)")
    return after


def projected(world: WorldState, env: BlockEnv) -> Settings:
    """The settings once every pending change has activated (what a new change is checked against)."""
    s = read_settings(world)
    for change in get_pending(world):
        try:
            s = apply_change(s, change, env)
        except TxFailed:
            continue
    return s


def schedule(world: WorldState, ctx: BlockContext, name: str, value: int, activation_height: int,
             events: list[Event]) -> int:
    """Check a change against the §14 rules and queue it; returns the bytes written. Raises TxFailed."""
    h = ctx.env.height
    if activation_height <= h:
        raise TxFailed(E_ACTIVATION_NOT_FUTURE, f"activation height {activation_height} is not above the "
                       f"current height {h}")
    pending = get_pending(world)
    if pending and activation_height < pending[-1].activation_height:
        raise TxFailed(E_ACTIVATION_OUT_OF_ORDER, f"a change is already pending for height "
                       f"{pending[-1].activation_height}; later changes must activate at or after it")
    if len(pending) >= MAX_PENDING:
        raise TxFailed(E_TOO_MANY_PENDING, f"{MAX_PENDING} governance changes are already pending")
    change = PendingChange(activation_height, name, value, h)
    apply_change(projected(world, ctx.env), change, ctx.env)
    written = set_pending(world, [*pending, change])
    events.append(Event(GOVERNANCE, TOPIC_SCHEDULED, encode(change.to_cbor())))
    return written


def schedule_param(world: WorldState, ctx: BlockContext, name: str, value: int, activation_height: int,
                   events: list[Event]) -> int:
    """:func:`schedule` of a GovernanceSetParam: ``name`` must be in :data:`PARAMS` (never :data:`PHASE`)."""
    if name not in PARAMS:
        raise TxFailed(E_UNKNOWN_PARAM, f"no governed parameter named {name!r}")
    return schedule(world, ctx, name, value, activation_height, events)


def activate_due(world: WorldState, ctx: BlockContext) -> int:
    """SystemHooks of block h: apply, in order, every pending change whose activation height is ≤ h + 1, so
    block h + 1 runs under it; one ``governance.activated`` (or ``governance.dropped``) event each in
    ``ctx.events``. Returns the number applied."""
    pending = get_pending(world)
    due = [c for c in pending if c.activation_height <= ctx.env.height + 1]
    if not due:
        return 0
    before = read_settings(world)
    s, applied = before, 0
    for change in due:
        try:
            s = apply_change(s, change, ctx.env)
        except TxFailed as e:
            ctx.events.append(Event(GOVERNANCE, TOPIC_DROPPED, encode({**change.to_cbor(), 4: e.code})))
            continue
        applied += 1
        ctx.events.append(Event(GOVERNANCE, TOPIC_ACTIVATED, encode(change.to_cbor())))
    write_settings(world, before, s)
    set_pending(world, pending[len(due):])
    return applied


def settings_json(s: Settings) -> dict[str, Any]:
    """``{"phase", "flags", "params": {NAME: value}}`` of ``s``."""
    return {"phase": s.flags.phase(), "flags": s.flags.to_json(),
            "params": {name: p.get(s) for name, p in PARAMS.items() if p.component != "flags"}}


def governance_view(world: WorldState) -> dict[str, Any]:
    """``{"active": settings_json, "pending": [change], "max_pending", "validators", "approvals_needed",
    "approval_nonce"}`` (``GET /params`` → ``governance``). ``approvals_needed`` is 0 when the system deployers
    govern directly (one validator); otherwise governed instructions need that many ValidatorApproved
    approvals over ``approval_nonce``."""
    n = validator_count(world)
    return {"active": settings_json(read_settings(world)), "pending": [c.to_json() for c in get_pending(world)],
            "max_pending": MAX_PENDING, "validators": n, "approvals_needed": 0 if n == 1 else quorum(n),
            "approval_nonce": get_approval_nonce(world)}
