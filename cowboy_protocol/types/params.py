"""Governed protocol parameters stored in state (CIP-3 basefees, CIP-5 timers, CIP-11 flags and constants).

Each config is a frozen dataclass with a canonical CBOR map form (integer
keys in declaration order) and a JSON form used by ``genesis.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TypeVar

from cowboy_protocol.types.fields import U32_MAX, U64_MAX, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

T = TypeVar("T", bound="_UintConfig")


@dataclass(frozen=True, slots=True)
class _UintConfig:
    """A config whose fields are all unsigned integers, encoded as {i: field_i}."""

    def to_cbor(self) -> dict[int, int]:
        """Canonical map: field index -> value."""
        return {i: getattr(self, f.name) for i, f in enumerate(fields(self))}

    @classmethod
    def from_cbor(cls: type[T], value: object) -> T:
        """Decode the canonical map, checking the exact key set and ranges."""
        fs = fields(cls)
        m = expect_map(value, frozenset(range(len(fs))), cls.__name__)
        obj = cls(**{f.name: expect_uint(m[i], f"{cls.__name__}.{f.name}") for i, f in enumerate(fs)})
        obj.validate()
        return obj

    def to_json(self) -> dict[str, int]:
        """JSON object with the field names as keys."""
        return asdict(self)

    @classmethod
    def from_json(cls: type[T], value: object, *, where: str) -> T:
        """Parse a JSON object; unknown keys are errors, missing keys take the defaults."""
        if not isinstance(value, dict):
            raise ValidationError("invalid_config", f"{where}: expected an object")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValidationError("invalid_config", f"{where}: unknown keys {unknown}, expected {sorted(names)}")
        kwargs: dict[str, int] = {}
        for name, raw in value.items():
            if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0 or raw > U64_MAX:
                raise ValidationError("invalid_config", f"{where}.{name}: expected an unsigned integer, got {raw!r}")
            kwargs[name] = raw
        obj = cls(**kwargs)
        obj.validate()
        return obj

    def validate(self) -> None:
        """Check cross-field constraints; subclasses override."""


@dataclass(frozen=True, slots=True)
class BasefeeConfig(_UintConfig):
    """CIP-3 dual-metering basefee parameters (DESIGN.md §4 "Fees")."""

    alpha: int = 96
    """Adjustment damping: Δ = bf·|used−target| / target / alpha."""
    denom: int = 96
    """Per-block change cap: |Δ| ≤ bf / denom."""
    cycles_target: int = 20_000_000
    """Target cycles per block."""
    cells_target: int = 4_000_000
    """Target cells per block."""
    min_basefee: int = 10_000
    """Floor for both basefees."""
    initial_basefee: int = 100_000
    """Basefee of the first block for both resources."""
    block_max_cycles: int = 40_000_000
    """Hard cap on cycles per block (and on a single transaction's cycles limit)."""
    block_max_cells: int = 8_000_000
    """Hard cap on cells per block (and on a single transaction's cells limit)."""

    def validate(self) -> None:
        for name in ("alpha", "denom", "cycles_target", "cells_target", "min_basefee"):
            if getattr(self, name) == 0:
                raise ValidationError("invalid_config", f"BasefeeConfig.{name} must be > 0")
        if self.block_max_cycles < self.cycles_target or self.block_max_cells < self.cells_target:
            raise ValidationError("invalid_config", "BasefeeConfig block maxima must be ≥ targets")
        if self.initial_basefee < self.min_basefee:
            raise ValidationError("invalid_config", "BasefeeConfig.initial_basefee must be ≥ min_basefee")


@dataclass(frozen=True, slots=True)
class TimerConfig(_UintConfig):
    """CIP-5 governed timer parameters, defaults from seeds/003 §6.4."""

    max_ttl_blocks: int = 2_592_000
    """Longest lifetime of a timer (~30 days at 1 s blocks)."""
    max_cycles_per_fire: int = 550_000
    """Ceiling on a timer's gas_limit_per_fire."""
    max_cells_per_fire: int = 550_000
    """Cells budget of every fire."""
    max_timers_per_actor: int = 1_024
    """Live timers one actor may hold."""
    gc_cycles_per_block: int = 5_000_000
    """Separate per-block budget for removing expired / unfunded timers (§6.5)."""

    def validate(self) -> None:
        if self.max_timers_per_actor > U32_MAX:
            raise ValidationError("invalid_config", "TimerConfig.max_timers_per_actor must fit u32")


@dataclass(frozen=True, slots=True)
class Cip11Flags:
    """CIP-11 §13 protocol flags (all default off)."""

    CIP11_TRANSPORT_ENABLED: bool = False
    """Phase 1: QUIC transport and best-effort push."""
    CIP11_PRESENCE_SHADOW_ENABLED: bool = False
    """Phase 1: PresenceInput populated for telemetry only."""
    CIP11_PRESENT_FIRST_ENABLED: bool = False
    """Phase 2: present-first selection; PresenceInput is a required block field."""
    CIP11_POLL_DISABLED: bool = False
    """Phase 3: GET /runner/{addr}/jobs answers 410 Gone."""
    PRESENCE_HARD_EXCLUDE_ENABLED: bool = False
    """Mode A request (inert unless the K_HARD_MIN guard holds)."""

    @classmethod
    def for_phase(cls, phase: int) -> Cip11Flags:
        """Flags for ``cowboy-node init --cip11-phase`` (0 off, 1 shadow, 2 present-first, 3 poll off)."""
        if phase not in (0, 1, 2, 3):
            raise ValidationError("invalid_config", f"cip11 phase must be 0..3, got {phase}")
        return cls(
            CIP11_TRANSPORT_ENABLED=phase >= 1,
            CIP11_PRESENCE_SHADOW_ENABLED=phase >= 1,
            CIP11_PRESENT_FIRST_ENABLED=phase >= 2,
            CIP11_POLL_DISABLED=phase >= 3,
        )

    def phase(self) -> int:
        """Rollout phase these flags express (§14): 3 poll disabled, 2 present-first, 1 transport, else 0."""
        if self.CIP11_POLL_DISABLED:
            return 3
        if self.CIP11_PRESENT_FIRST_ENABLED:
            return 2
        return 1 if self.CIP11_TRANSPORT_ENABLED else 0

    def to_cbor(self) -> dict[int, bool]:
        """Canonical map: field index -> bool."""
        return {i: getattr(self, f.name) for i, f in enumerate(fields(self))}

    @classmethod
    def from_cbor(cls, value: object) -> Cip11Flags:
        """Decode the canonical map."""
        fs = fields(cls)
        m = expect_map(value, frozenset(range(len(fs))), "Cip11Flags")
        out: dict[str, bool] = {}
        for i, f in enumerate(fs):
            if not isinstance(m[i], bool):
                raise DecodeError(f"Cip11Flags.{f.name}: expected a bool", field=f.name)
            out[f.name] = m[i]
        return cls(**out)

    def to_json(self) -> dict[str, bool]:
        """JSON object keyed by flag name."""
        return asdict(self)

    @classmethod
    def from_json(cls, value: object, *, where: str) -> Cip11Flags:
        """Parse a JSON object of flag names to booleans."""
        if not isinstance(value, dict):
            raise ValidationError("invalid_config", f"{where}: expected an object")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValidationError("invalid_config", f"{where}: unknown flags {unknown}")
        for k, v in value.items():
            if not isinstance(v, bool):
                raise ValidationError("invalid_config", f"{where}.{k}: expected true or false")
        return cls(**value)


@dataclass(frozen=True, slots=True)
class Cip11Params(_UintConfig):
    """CIP-11 §13 constants that live outside RunnerConfig / ChainLimits, governed by GovernanceSetParam.

    Stored under ``sys/cip11_params`` only once governance first changes one (absent: these defaults, so a
    genesis state is unchanged). Mostly transport-side (read by the node's transport, not by execution);
    ``MIN_SUBSET``/``MAX_SUBSET``/``K_HARD_MIN``/``T_HARD`` also feed the §8.4 Mode A guard governance checks.
    """

    MIN_SUBSET: int = 3
    """Floor on the connectivity subset size k (§5.1)."""
    MAX_SUBSET: int = 8
    """Ceiling on k in default Mode B."""
    K_HARD_MIN: int = 20
    """Minimum effective k for Mode A hard-exclude; governance-tunable upward only (§13)."""
    T_HARD: int = 0
    """Mode A certificate receipt threshold (0: not chosen yet; Mode A cannot be enabled)."""
    RESULT_TX_INCLUSION_GRACE_BLOCKS: int = 2
    """Blocks before a runner self-submits its result tx (§10.3)."""
    RESULT_TX_REBROADCAST_INTERVAL_BLOCKS: int = 2
    """Rebroadcast interval of a self-submitted result tx (§10.3)."""
    HEARTBEAT_BLOCKS: int = 1
    """QUIC HeartbeatPing cadence (§6.3)."""
    PRESENCE_TIMEOUT_BLOCKS: int = 15
    """Local-presence drop gap (§6.3, §7.4)."""
    ACK_TIMEOUT_BLOCKS: int = 15
    """HardFailure threshold after a JobAssignment (§10.6)."""
    RECEIPT_FRESHNESS_BLOCKS: int = 30
    """Mode A: maximum PresenceReceipt age (§8.3)."""
    PRESENCE_PROOF_TTL_BLOCKS: int = 60
    """Mode A: how long a verified certificate keeps a runner present (§8.3)."""
    OVERLAP_BLOCKS: int = 160
    """Reconfiguration overlap window (§5.3)."""

    def validate(self) -> None:
        if self.MIN_SUBSET > self.MAX_SUBSET:
            raise ValidationError("invalid_config", "Cip11Params.MIN_SUBSET must not exceed MAX_SUBSET")
        if self.PRESENCE_TIMEOUT_BLOCKS <= self.HEARTBEAT_BLOCKS:
            raise ValidationError("invalid_config", "Cip11Params.PRESENCE_TIMEOUT_BLOCKS must exceed HEARTBEAT_BLOCKS")


@dataclass(frozen=True, slots=True)
class ChainLimits(_UintConfig):
    """Non-fee limits on transactions and blocks."""

    max_tx_bytes: int = 131_072
    """Largest encoded transaction body accepted."""
    max_block_txs: int = 10_000
    """Most transactions in one block."""
    heartbeat_timeout_blocks: int = 100
    """CIP-11 HEARTBEAT_TIMEOUT_BLOCKS (governed)."""


@dataclass(frozen=True, slots=True)
class RunnerConfig(_UintConfig):
    """Governed runner-registry and job parameters (CIP-2 as used by CIP-11; DESIGN.md §4 "Runner registry").

    Reputation values are fixed point ×1e9 (``50_000_000_000`` = 50.0); permille values are out of 1,000.
    Stored in state; genesis ``params.runners``.
    """

    min_runner_stake: int = 10**18
    """Smallest stake a RunnerRegister may bond (genesis minimum, CIP-11 MIN_STAKE_CBY_WEI)."""
    unbonding_blocks: int = 1_000
    """Blocks between RunnerDeregister and the return of the stake."""
    initial_reputation_x1e9: int = 50_000_000_000
    """Reputation of a newly registered runner (50)."""
    min_reputation_x1e9: int = 50_000_000_000
    """Candidate reputation filter: candidates need at least this (50)."""
    max_reputation_x1e9: int = 100_000_000_000
    """Reputation ceiling (100)."""
    reputation_normalizer_x1e9: int = 100_000_000_000
    """REPUTATION_NORMALIZER of the CIP-2 v3 weight: weight = stake · max(sqrt(rep / norm), w_min_floor)."""
    w_min_floor_x1e6: int = 100_000
    """w_min_floor of the CIP-2 v3 weight, ×1e6 (0.1)."""
    reputation_reward_x1e9: int = 1_000_000_000
    """Reputation added for a result that contributed to a verified outcome (+1)."""
    reputation_timeout_penalty_x1e9: int = 5_000_000_000
    """Reputation removed for a missed deadline (−5)."""
    reputation_slash_penalty_x1e9: int = 20_000_000_000
    """Reputation removed for commit-without-reveal or a minority/invalid result (−20)."""
    slash_permille: int = 100
    """Share of stake slashed for commit-without-reveal (10%)."""
    mru_ttl_blocks: int = 1_280
    """CIP-11 MRU_TTL_BLOCKS."""
    mru_weight_multiplier: int = 4
    """CIP-11 MRU_WEIGHT_MULTIPLIER (iteration 0 only)."""
    selection_seed_delay_views: int = 3
    """CIP-11 SELECTION_SEED_DELAY_VIEWS (K) for M > 1 commit-then-reveal selection."""
    max_job_retries: int = 3
    """Timeout re-selections before a job fails."""
    commit_phase_permille: int = 600
    """Commit phase = the first 0.6 · timeout_blocks of an assignment; reveals after it."""
    payment_runner_permille: int = 890
    """Share of the payment paid to the runners (89%)."""
    payment_burn_permille: int = 100
    """Share of the payment burned (10%); the rest (1%) goes to the treasury."""
    max_active_runners: int = 100_000
    """Cap on the append-only active-runner array (bounds PresenceInput and registry scans)."""

    def validate(self) -> None:
        if max(self.min_reputation_x1e9, self.initial_reputation_x1e9) > self.max_reputation_x1e9:
            raise ValidationError("invalid_config", "RunnerConfig reputations must not exceed max_reputation_x1e9")
        if self.reputation_normalizer_x1e9 == 0:
            raise ValidationError("invalid_config", "RunnerConfig.reputation_normalizer_x1e9 must be > 0")
        if self.commit_phase_permille == 0 or self.commit_phase_permille >= 1_000:
            raise ValidationError("invalid_config", "RunnerConfig.commit_phase_permille must be in 1..999")
        if self.payment_runner_permille + self.payment_burn_permille > 1_000 or self.slash_permille > 1_000:
            raise ValidationError("invalid_config", "RunnerConfig permille shares must not exceed 1000")
        if self.mru_weight_multiplier == 0:
            raise ValidationError("invalid_config", "RunnerConfig.mru_weight_multiplier must be > 0")
