"""Read-only views of the Runner Registry and the protocol parameters for the HTTP API (JSON-ready dicts).

Each view function reads one :class:`WorldState`; the caller holds the node's state lock so the view and
``height`` belong to the same head. :class:`RunnerQueries` gives a node the three facade methods
(``params``, ``runners_active``, ``runner``) on top of these views.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from cowboy_node.execution.governance import governance_view
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import (
    get_basefee_config,
    get_basefees,
    get_chain_limits,
    get_cip11_flags,
    get_cip11_params,
    get_runner_config,
    get_timer_config,
)
from cowboy_node.execution.timers.policy import get_timer_policy
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.runner import Health, RunnerRecord
from cowboy_protocol.types.runner_json import record_to_json

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain


def passes_floor(rec: RunnerRecord, *, height: int, heartbeat_timeout_blocks: int) -> bool:
    """CIP-11 §7.1 eligibility floor: HEALTHY and ``height − last_heartbeat ≤ HEARTBEAT_TIMEOUT_BLOCKS``."""
    return rec.health == Health.HEALTHY and max(height - rec.last_heartbeat, 0) <= heartbeat_timeout_blocks


def _runner_json(rec: RunnerRecord, *, height: int, timeout: int) -> dict[str, Any]:
    out = record_to_json(rec)
    out["eligible_now"] = passes_floor(rec, height=height, heartbeat_timeout_blocks=timeout)
    return out


def params_view(world: WorldState, *, height: int) -> dict[str, Any]:
    """Every governed protocol parameter at the head: ``{"height", "basefee", "basefees", "timer",
    "timer_policy", "limits", "cip11", "runners", "cip11_params", "governance"}`` (``runners.min_runner_stake``
    included; ``governance``: phase, every governed CIP-11 value and the pending changes, execution/governance.py)."""
    cycle_bf, cell_bf = get_basefees(world)
    return {
        "height": height,
        "basefee": get_basefee_config(world).to_json(),
        "basefees": {"cycle": cycle_bf, "cell": cell_bf},
        "timer": get_timer_config(world).to_json(),
        "timer_policy": get_timer_policy(world).to_json(),
        "limits": get_chain_limits(world).to_json(),
        "cip11": get_cip11_flags(world).to_json(),
        "runners": get_runner_config(world).to_json(),
        "cip11_params": get_cip11_params(world).to_json(),
        "governance": governance_view(world),
    }


def runners_active_view(world: WorldState, *, height: int, offset: int, limit: int) -> dict[str, Any]:
    """Entries ``offset .. offset+limit−1`` of the active-runner array, in index order, each with its record
    and ``eligible_now`` (the §7.1 floor at the head height): ``{"height", "count", "offset",
    "heartbeat_timeout_blocks", "runners", "truncated"}``."""
    addresses = store.active_runner_addresses(world)
    timeout = get_chain_limits(world).heartbeat_timeout_blocks
    runners: list[dict[str, Any]] = []
    for i, address in enumerate(addresses[offset:offset + limit], start=offset):
        rec = store.get_runner(world, address)
        if rec is None or rec.index != i:
            raise ValueError(f"runner registry: index {i} has no matching record")
        runners.append(_runner_json(rec, height=height, timeout=timeout))
    return {"height": height, "count": len(addresses), "offset": offset, "heartbeat_timeout_blocks": timeout,
            "runners": runners, "truncated": offset + len(runners) < len(addresses)}


def runner_view(world: WorldState, address: bytes, *, height: int) -> dict[str, Any] | None:
    """The registration of ``address`` with ``eligible_now`` and ``height``; None if it never registered."""
    rec = store.get_runner(world, address)
    if rec is None:
        return None
    out = _runner_json(rec, height=height, timeout=get_chain_limits(world).heartbeat_timeout_blocks)
    out["height"] = height
    return out


class RunnerQueries:
    """The Runner Registry and parameter methods of :class:`~cowboy_node.rpc.facade.NodeFacade`, for a node
    given the node's ``chain`` and its state lock (composed into ``node/api.py``'s ``NodeApi``)."""

    def __init__(self, chain: Chain, tree_lock: threading.Lock) -> None:
        self.chain = chain
        """The node's chain (head state and height)."""
        self._tree_lock = tree_lock
        """Held while a block is built; reads take it so a view and its height belong to one head."""

    def params(self) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return params_view(self.chain.world(), height=self.chain.height)

    def runners_active(self, offset: int, limit: int) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return runners_active_view(self.chain.world(), height=self.chain.height, offset=offset, limit=limit)

    def runner(self, address: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return runner_view(self.chain.world(), address, height=self.chain.height)
