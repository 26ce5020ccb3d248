"""Well-known state keys of the chain's own configuration and their typed accessors.

Governed configs live under the Basefee system actor's namespace, as CIP-5
§6.4 prescribes for ``TimerConfig``.
"""

from __future__ import annotations

from cowboy_node.execution.records import decode_account, put_account_fields
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account, account_key
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, decode_u128, encode_u128, expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.params import (
    BasefeeConfig,
    ChainLimits,
    Cip11Flags,
    Cip11Params,
    RunnerConfig,
    TimerConfig,
)
from cowboy_protocol.types.validation_errors import DecodeError


def system_address(low_byte: int) -> bytes:
    """20-byte system actor address with only the low byte set (0x01..0x0F reserved)."""
    return bytes(19) + bytes([low_byte])


RUNNER_REGISTRY = system_address(0x01)
JOB_DISPATCHER = system_address(0x02)
RESULT_VERIFIER = system_address(0x03)
BASEFEE_ACTOR = system_address(0x06)
GOVERNANCE = system_address(0x09)

_BASEFEE_NS = b"actor/" + BASEFEE_ACTOR + b"/kv/system:"
KEY_BASEFEE_CONFIG = _BASEFEE_NS + b"basefee_config"
KEY_BASEFEE_STATE = _BASEFEE_NS + b"basefee_state"
KEY_TIMER_CONFIG = _BASEFEE_NS + b"timer_config"
KEY_TIMER_CONFIG_NEXT = _BASEFEE_NS + b"timer_config_next"
"""An UpdateTimerConfig's config until the end of its block (seeds/003 §7: mid-block changes do not apply)."""
KEY_CHAIN_LIMITS = b"sys/chain_limits"
KEY_RUNNER_CONFIG = b"actor/" + RUNNER_REGISTRY + b"/kv/system:runner_config"
KEY_CIP11_FLAGS = b"sys/cip11_flags"
KEY_CIP11_PARAMS = b"sys/cip11_params"
KEY_GOVERNANCE_PENDING = b"actor/" + GOVERNANCE + b"/kv/system:pending"
KEY_SYSTEM_DEPLOYERS = b"sys/system_deployers"
KEY_CHAIN_ID = b"sys/chain_id"
KEY_BURNED = b"sys/burned_total"


def get_account(world: WorldState, address: bytes) -> Account:
    """Account at ``address`` (a zero account if absent)."""
    raw = world.get(account_key(address))
    return Account() if raw is None else decode_account(raw)  # Account.decode's value or error, faster


def put_account(world: WorldState, address: bytes, account: Account) -> int:
    """Store ``account``; returns the bytes written (for cell metering)."""
    return put_account_fields(world, address, account.balance, account.nonce)


def move_balance(world: WorldState, src: bytes, dst: bytes, amount: int) -> None:
    """Move ``amount`` from ``src`` to ``dst`` (the caller has checked ``src`` can afford it)."""
    if amount == 0:
        return
    a = get_account(world, src)
    put_account(world, src, Account(a.balance - amount, a.nonce))
    b = get_account(world, dst)
    put_account(world, dst, Account(b.balance + amount, b.nonce))


def get_basefee_config(world: WorldState) -> BasefeeConfig:
    """Governed CIP-3 config (defaults when absent)."""
    raw = world.get(KEY_BASEFEE_CONFIG)
    return BasefeeConfig() if raw is None else BasefeeConfig.from_cbor(decode(raw))


def set_basefee_config(world: WorldState, cfg: BasefeeConfig) -> None:
    """Replace the governed CIP-3 config."""
    world.set(KEY_BASEFEE_CONFIG, encode(cfg.to_cbor()))


def get_basefees(world: WorldState) -> tuple[int, int]:
    """(cycle_basefee, cell_basefee) that apply to the current block."""
    raw = world.get(KEY_BASEFEE_STATE)
    if raw is None:
        initial = get_basefee_config(world).initial_basefee
        return initial, initial
    m = expect_map(decode(raw), frozenset({0, 1}), "basefee_state")
    return expect_uint(m[0], "cycle_basefee"), expect_uint(m[1], "cell_basefee")


def set_basefees(world: WorldState, cycle_basefee: int, cell_basefee: int) -> None:
    """Store the basefees for the next block."""
    world.set(KEY_BASEFEE_STATE, encode({0: cycle_basefee, 1: cell_basefee}))


def get_timer_config(world: WorldState) -> TimerConfig:
    """Governed CIP-5 timer config (seeds/003 §6.4 defaults when absent)."""
    raw = world.get(KEY_TIMER_CONFIG)
    return TimerConfig() if raw is None else TimerConfig.from_cbor(decode(raw))


def set_timer_config(world: WorldState, cfg: TimerConfig) -> None:
    """Replace the governed timer config."""
    world.set(KEY_TIMER_CONFIG, encode(cfg.to_cbor()))


def stage_timer_config(world: WorldState, cfg: TimerConfig) -> None:
    """Record ``cfg`` to take effect from the next block (the last one staged in a block wins)."""
    world.set(KEY_TIMER_CONFIG_NEXT, encode(cfg.to_cbor()))


def apply_staged_timer_config(world: WorldState) -> None:
    """End of block: the config staged in this block (if any) becomes the governed one (seeds/003 §7
    "TimerConfig is read once per block from consensus state; mid-block changes do not apply")."""
    raw = world.get(KEY_TIMER_CONFIG_NEXT)
    if raw is not None:
        world.set(KEY_TIMER_CONFIG, raw)
        world.delete(KEY_TIMER_CONFIG_NEXT)


def get_runner_config(world: WorldState) -> RunnerConfig:
    """Governed runner-registry and job config (defaults when absent)."""
    raw = world.get(KEY_RUNNER_CONFIG)
    return RunnerConfig() if raw is None else RunnerConfig.from_cbor(decode(raw))


def set_runner_config(world: WorldState, cfg: RunnerConfig) -> None:
    """Replace the governed runner-registry and job config."""
    world.set(KEY_RUNNER_CONFIG, encode(cfg.to_cbor()))


def get_chain_limits(world: WorldState) -> ChainLimits:
    """Transaction/block limits."""
    raw = world.get(KEY_CHAIN_LIMITS)
    return ChainLimits() if raw is None else ChainLimits.from_cbor(decode(raw))


def set_chain_limits(world: WorldState, limits: ChainLimits) -> None:
    """Store transaction/block limits."""
    world.set(KEY_CHAIN_LIMITS, encode(limits.to_cbor()))


def get_cip11_flags(world: WorldState) -> Cip11Flags:
    """CIP-11 §13 protocol flags."""
    raw = world.get(KEY_CIP11_FLAGS)
    return Cip11Flags() if raw is None else Cip11Flags.from_cbor(decode(raw))


def set_cip11_flags(world: WorldState, flags: Cip11Flags) -> None:
    """Store CIP-11 flags."""
    world.set(KEY_CIP11_FLAGS, encode(flags.to_cbor()))


def get_cip11_params(world: WorldState) -> Cip11Params:
    """CIP-11 §13 constants governed outside RunnerConfig / ChainLimits (defaults when absent)."""
    raw = world.get(KEY_CIP11_PARAMS)
    return Cip11Params() if raw is None else Cip11Params.from_cbor(decode(raw))


def set_cip11_params(world: WorldState, params: Cip11Params) -> None:
    """Store the CIP-11 §13 constants."""
    world.set(KEY_CIP11_PARAMS, encode(params.to_cbor()))


def get_system_deployers(world: WorldState) -> tuple[bytes, ...]:
    """Addresses allowed to send system (governance) instructions."""
    raw = world.get(KEY_SYSTEM_DEPLOYERS)
    if raw is None:
        return ()
    value = decode(raw)
    if not isinstance(value, list):
        raise DecodeError("system_deployers: expected an array")
    return tuple(expect_bytes(a, "system_deployer", ADDRESS_LEN) for a in value)


def set_system_deployers(world: WorldState, deployers: tuple[bytes, ...]) -> None:
    """Store the system deployer list (sorted, so order in genesis does not matter)."""
    world.set(KEY_SYSTEM_DEPLOYERS, encode(sorted(deployers)))


def get_burned(world: WorldState) -> int:
    """Total amount burned since genesis."""
    raw = world.get(KEY_BURNED)
    return 0 if raw is None else decode_u128(decode(raw), "burned_total")


def add_burned(world: WorldState, amount: int) -> None:
    """Add to the burned total."""
    if amount:
        world.set(KEY_BURNED, encode(encode_u128(get_burned(world) + amount)))
