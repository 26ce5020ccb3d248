"""When to reconnect and when to send the on-chain heartbeat.

Two schedules, both pure functions (the caller supplies the randomness and the heights):

* :func:`backoff_delay` — QUIC reconnect backoff (CIP-11 §11.3): ``100 ms × 2^attempt``, capped at 30 s, then
  ±25 % jitter so that runners cut off together do not come back together.
* :func:`heartbeat_due` — the on-chain ``RunnerHeartbeat`` that keeps the eligibility floor fresh (CIP-11 §6.6,
  §7.1). Each runner owns a deterministic phase bucket ``keccak256(chain_id ‖ address) mod cadence`` and sends
  its steady-state heartbeat there, so 5,000 runners spread over the cadence instead of sending in the same
  block; a forced refresh fires shortly before ``height − last_heartbeat`` would exceed
  ``HEARTBEAT_TIMEOUT_BLOCKS``.

Byte layout of the phase key (project choice, CIP-11 gives only ``chain_id ‖ runner_address``):
``chain_id`` is the chain id text as UTF-8 (the same string transactions carry), ``runner_address`` the raw
20-byte address; the 32-byte digest is read as a big-endian unsigned integer.
"""

from __future__ import annotations

from typing import Protocol

from cowboy_protocol.crypto.keccak import keccak256

BACKOFF_BASE_S = 0.1
"""First reconnect delay before jitter (CIP-11 §11.3: 100 ms)."""
BACKOFF_CAP_S = 30.0
"""Largest reconnect delay before jitter (30 s)."""
BACKOFF_JITTER = 0.25
"""Relative jitter: the delay is multiplied by a uniform factor in [0.75, 1.25]."""
_MAX_DOUBLINGS = 16
"""2^16 × 0.1 s is far beyond the cap: larger attempts need no bigger power (and must not overflow floats)."""

DEFAULT_SAFETY_MARGIN_BLOCKS = 20
"""Default ``safety_margin_blocks`` of §6.6: inclusion/finality delay, jitter and short mempool congestion."""


class Rng(Protocol):
    """What :func:`backoff_delay` needs from a random source (``random.Random`` fits)."""

    def random(self) -> float:
        """A float uniformly distributed in [0, 1)."""
        ...


def backoff_delay(attempt: int, rng: Rng) -> float:
    """Seconds to wait before reconnect attempt ``attempt`` (0 for the first retry).

    ``min(0.1 × 2^attempt, 30) × (1 + 0.25 × u)`` with ``u`` uniform in [−1, 1), so the result lies in
    [0.075, 37.5) s: the jitter is applied after the cap, as §11.3 states the cap and the jitter separately.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    base = min(BACKOFF_BASE_S * float(2 ** min(attempt, _MAX_DOUBLINGS)), BACKOFF_CAP_S)
    u = 2.0 * rng.random() - 1.0
    return base * (1.0 + BACKOFF_JITTER * u)


def effective_cadence(timeout_blocks: int, safety_margin_blocks: int = DEFAULT_SAFETY_MARGIN_BLOCKS,
                      requested: int | None = None) -> int:
    """``effective_cadence_blocks`` of §6.6: ``requested`` (0/None: as long as allowed), never more than
    ``HEARTBEAT_TIMEOUT_BLOCKS − safety_margin_blocks``.

    Raises ValueError when the margin leaves no room (``timeout − margin < 1``) or an argument is negative.
    """
    if timeout_blocks < 2 or safety_margin_blocks < 1:
        raise ValueError(f"need HEARTBEAT_TIMEOUT_BLOCKS >= 2 and a safety margin >= 1, got "
                         f"{timeout_blocks} and {safety_margin_blocks}")
    ceiling = timeout_blocks - safety_margin_blocks
    if ceiling < 1:
        raise ValueError(f"safety margin {safety_margin_blocks} leaves no cadence under "
                         f"HEARTBEAT_TIMEOUT_BLOCKS {timeout_blocks}")
    if requested is None or requested == 0:
        return ceiling
    if requested < 0:
        raise ValueError(f"cadence must be >= 0, got {requested}")
    return min(requested, ceiling)


def heartbeat_phase(chain_id: str, address: bytes, cadence: int) -> int:
    """The runner's phase bucket: ``int_be(keccak256(utf8(chain_id) ‖ address)) mod cadence``."""
    if len(address) != 20:
        raise ValueError(f"address must be 20 bytes, got {len(address)}")
    if cadence < 1:
        raise ValueError(f"cadence must be >= 1, got {cadence}")
    return int.from_bytes(keccak256(chain_id.encode("utf-8") + address), "big") % cadence


def forced_refresh_lead(cadence: int, timeout: int) -> int:
    """How many blocks before the floor lapses the forced refresh starts: half the slack ``timeout − cadence``
    (at least 1), so a normal-cadence miss still leaves that many blocks for inclusion."""
    return max(1, (timeout - cadence) // 2)


def heartbeat_due(height: int, last_heartbeat_height: int, address: bytes, chain_id: str, cadence: int,
                  timeout: int) -> bool:
    """Whether an on-chain heartbeat should be sent at ``height`` (the newest finalized height seen).

    ``last_heartbeat_height`` is the registry's ``last_heartbeat`` (the registration counts as one);
    ``cadence`` is :func:`effective_cadence` (it must be below ``timeout``). Due when either

    * steady state: ``height mod cadence == phase`` and no heartbeat was included at ``height`` itself; or
    * forced refresh: ``timeout − lead ≤ height − last_heartbeat ≤ timeout`` (:func:`forced_refresh_lead`),
      i.e. the normal cadence was missed and the floor would lapse soon.

    Once the floor has already lapsed (``height − last_heartbeat > timeout``, e.g. after a partition) only the
    phase bucket applies: refreshing every lapsed runner at once would be the herd §6.6 forbids, and the
    runner is back within ``cadence`` blocks. True says a heartbeat should be in flight; the caller sends at
    most one at a time (the registry nonce orders them anyway).
    """
    if not 1 <= cadence < timeout:
        raise ValueError(f"cadence must be in 1..timeout-1 (timeout {timeout}), got {cadence}")
    elapsed = height - last_heartbeat_height
    if elapsed <= 0:  # included at this height (or our view lags the registry): nothing to do
        return False
    if timeout - forced_refresh_lead(cadence, timeout) <= elapsed <= timeout:
        return True
    return height % cadence == heartbeat_phase(chain_id, address, cadence)
