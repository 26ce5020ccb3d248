"""Genesis state: the initial accounts and governed configs, written into an empty world."""

from __future__ import annotations

from collections.abc import Mapping

from cowboy_node.execution import system_state as ss
from cowboy_node.execution.validator_set import put_snapshot
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_protocol.codec import encode
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, RunnerConfig, TimerConfig


def apply_genesis(world: WorldState, *, chain_id: str, balances: Mapping[bytes, int],
                  system_deployers: tuple[bytes, ...], basefee: BasefeeConfig, timer: TimerConfig,
                  limits: ChainLimits, flags: Cip11Flags,
                  runners: RunnerConfig | None = None, validator_peer_keys: tuple[bytes, ...] = ()) -> None:
    """Write the genesis state. Iterates balances in sorted order so the journal is seed-independent.

    ``validator_peer_keys`` (the genesis validators' Ed25519 keys in participant order) become the
    genesis-anchored ``ValidatorSetSnapshot(0)`` (CIP-11 §5.4); empty only in unit tests of other state."""
    world.set(ss.KEY_CHAIN_ID, encode(chain_id))
    for address in sorted(balances):
        ss.put_account(world, address, Account(balances[address], 0))
    ss.set_system_deployers(world, system_deployers)
    ss.set_basefee_config(world, basefee)
    ss.set_basefees(world, basefee.initial_basefee, basefee.initial_basefee)
    ss.set_timer_config(world, timer)
    ss.set_chain_limits(world, limits)
    ss.set_cip11_flags(world, flags)
    ss.set_runner_config(world, runners or RunnerConfig())
    if validator_peer_keys:
        put_snapshot(world, 0, validator_peer_keys)
