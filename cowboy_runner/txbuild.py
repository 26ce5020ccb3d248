"""Build and sign the runner's transactions.

Result phase (CIP-11 §10.3): ``JobResultCommit`` carries
``commitment = result_commitment(job_id, runner, result, salt)`` — the function the Result Verifier itself
recomputes when the reveal arrives (``execution/jobs/results.submit_result``) — and ``JobResultSubmit`` reveals
``result``, ``salt`` and the usage ``units``. Salt rule: at most 32 bytes; a fresh random 32-byte salt
(:func:`new_salt`) for every commitment, so a committed result cannot be guessed from the commitment by
another committee member; an empty salt when the reveal comes without a commitment (M == 1 may skip the commit).

Registry: ``RunnerRegister``, ``RunnerHeartbeat``, ``RunnerDeregister`` (``RunnerUpdate*`` too, for
completeness). Nothing here talks to the network: the nonce and the fees are arguments; :class:`Fees` turns the
basefees of the node's ``/params`` (``basefees.cycle`` / ``basefees.cell``) into fee fields with the same
defaults as the node CLI (max fee 2 × basefee, tip ``DEFAULT_PRIORITY_FEE`` capped at the max fee).

Limits follow the node CLI too: 50,000 cycles (``RUNNER_CYCLES_LIMIT``; a result tx uses 20,000 — 10,000
intrinsic + 10,000 ``RESULT_CYCLES`` — unused cycles are refunded), 500,000 for a registration, and cells
``2 × len(canonical instruction) + CELLS_MARGIN`` (the intrinsic cost is the tx body + 64 cells, and a reveal
writes the result again into the job record).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cowboy_protocol.codec import encode
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.txfees import CELLS_MARGIN, DEFAULT_PRIORITY_FEE, REGISTER_CYCLES_LIMIT, RUNNER_CYCLES_LIMIT
from cowboy_protocol.types.fields import HASH_LEN, U64_MAX
from cowboy_protocol.types.instructions import Instruction, instruction_to_cbor
from cowboy_protocol.types.job_instructions import MAX_RESULT_BYTES, MAX_SALT_BYTES, JobResultCommit, JobResultSubmit
from cowboy_protocol.types.runner import Capabilities, RateCard
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from cowboy_protocol.types.transaction import Transaction
from cowboy_runner.keyfile import RunnerKey

SALT_BYTES = MAX_SALT_BYTES
"""Length of the salts :func:`new_salt` makes (32, the chain's maximum)."""
DEFAULT_FEE_MULTIPLIER = 2
"""Max fee per unit = this × the current basefee (headroom for basefee rises until inclusion/rebroadcast)."""


class TxBuildError(ValueError):
    """A transaction that cannot be built as asked; ``code`` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Fees:
    """The four fee fields of a transaction."""

    max_fee_per_cycle: int
    """Ceiling on basefee + tip per cycle."""
    max_priority_fee_per_cycle: int
    """Tip per cycle (at most ``max_fee_per_cycle``)."""
    max_fee_per_cell: int
    """Ceiling on basefee + tip per cell."""
    max_priority_fee_per_cell: int
    """Tip per cell (at most ``max_fee_per_cell``)."""

    def __post_init__(self) -> None:
        for name in ("max_fee_per_cycle", "max_priority_fee_per_cycle", "max_fee_per_cell",
                     "max_priority_fee_per_cell"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U64_MAX:
                raise TxBuildError("invalid_fees", f"{name} must be an integer in 0..2^64-1, got {v!r}")
        if self.max_priority_fee_per_cycle > self.max_fee_per_cycle \
                or self.max_priority_fee_per_cell > self.max_fee_per_cell:
            raise TxBuildError("invalid_fees", "a priority fee exceeds its max fee")

    @classmethod
    def from_basefees(cls, cycle_basefee: int, cell_basefee: int, *, multiplier: int = DEFAULT_FEE_MULTIPLIER,
                      priority_fee_per_cycle: int = DEFAULT_PRIORITY_FEE,
                      priority_fee_per_cell: int = DEFAULT_PRIORITY_FEE) -> Fees:
        """Max fee ``multiplier × basefee`` (capped at u64), tip capped at the max fee."""
        if cycle_basefee < 0 or cell_basefee < 0 or multiplier < 1:
            raise TxBuildError("invalid_fees", "basefees must be >= 0 and the multiplier >= 1")
        max_cycle = min(multiplier * cycle_basefee, U64_MAX)
        max_cell = min(multiplier * cell_basefee, U64_MAX)
        return cls(max_cycle, min(priority_fee_per_cycle, max_cycle), max_cell, min(priority_fee_per_cell, max_cell))


def new_salt() -> bytes:
    """A fresh 32-byte commitment salt from the OS random source."""
    return os.urandom(SALT_BYTES)


def cells_limit_for(instruction: Instruction) -> int:
    """``2 × len(canonical instruction) + CELLS_MARGIN`` (the node CLI's default for runner transactions)."""
    return 2 * len(encode(instruction_to_cbor(instruction))) + CELLS_MARGIN


def build_tx(key: RunnerKey, chain_id: str, instruction: Instruction, *, nonce: int, fees: Fees,
             cycles_limit: int = RUNNER_CYCLES_LIMIT, cells_limit: int | None = None,
             max_tx_bytes: int | None = None) -> Transaction:
    """Sign ``instruction`` as ``key`` with the given nonce, fees and limits (cells: :func:`cells_limit_for`).

    ``max_tx_bytes`` (the node's ``limits.max_tx_bytes``) refuses a body the node would reject as too large.
    """
    if isinstance(nonce, bool) or not 0 <= nonce <= U64_MAX:
        raise TxBuildError("invalid_nonce", f"nonce must be in 0..2^64-1, got {nonce!r}")
    tx = Transaction(
        chain_id=chain_id, nonce=nonce, sender=key.address, instruction=instruction,
        cycles_limit=cycles_limit, cells_limit=cells_limit_for(instruction) if cells_limit is None else cells_limit,
        max_fee_per_cycle=fees.max_fee_per_cycle, max_priority_fee_per_cycle=fees.max_priority_fee_per_cycle,
        max_fee_per_cell=fees.max_fee_per_cell, max_priority_fee_per_cell=fees.max_priority_fee_per_cell,
    ).signed(key.private_key)
    if max_tx_bytes is not None and len(tx.body()) > max_tx_bytes:
        raise TxBuildError("tx_too_large", f"transaction body of {len(tx.body())} bytes exceeds the node's "
                                           f"{max_tx_bytes}-byte limit")
    return tx


def _check_result(job_id: bytes, result: bytes, salt: bytes) -> None:
    if len(job_id) != HASH_LEN:
        raise TxBuildError("invalid_job_id", f"job_id must be {HASH_LEN} bytes, got {len(job_id)}")
    if len(result) > MAX_RESULT_BYTES:
        raise TxBuildError("result_too_large", f"results are limited to {MAX_RESULT_BYTES} bytes, got {len(result)}")
    if len(salt) > MAX_SALT_BYTES:
        raise TxBuildError("invalid_salt", f"salts are limited to {MAX_SALT_BYTES} bytes, got {len(salt)}")


def commitment_for(key: RunnerKey, job_id: bytes, result: bytes, salt: bytes) -> bytes:
    """The commitment the chain will recompute from the reveal (``result_commitment`` with ``key``'s address)."""
    _check_result(job_id, result, salt)
    return result_commitment(job_id, key.address, result, salt)


def build_result_commit(key: RunnerKey, chain_id: str, *, job_id: bytes, result: bytes, salt: bytes, nonce: int,
                        fees: Fees, max_tx_bytes: int | None = None) -> Transaction:
    """``JobResultCommit(job_id, commitment_for(key, job_id, result, salt))``; the salt must not be empty."""
    if not salt:
        raise TxBuildError("invalid_salt", "a commitment needs a salt (use new_salt())")
    ins = JobResultCommit(job_id, commitment_for(key, job_id, result, salt))
    return build_tx(key, chain_id, ins, nonce=nonce, fees=fees, max_tx_bytes=max_tx_bytes)


def build_result_submit(key: RunnerKey, chain_id: str, *, job_id: bytes, result: bytes, salt: bytes, units: int,
                        nonce: int, fees: Fees, max_tx_bytes: int | None = None) -> Transaction:
    """``JobResultSubmit(job_id, result, salt, units)`` — the reveal (``salt`` empty when nothing was committed)."""
    _check_result(job_id, result, salt)
    if isinstance(units, bool) or not 0 <= units <= U64_MAX:
        raise TxBuildError("invalid_units", f"units must be in 0..2^64-1, got {units!r}")
    ins = JobResultSubmit(job_id, result, salt, units)
    return build_tx(key, chain_id, ins, nonce=nonce, fees=fees, max_tx_bytes=max_tx_bytes)


def build_heartbeat(key: RunnerKey, chain_id: str, *, accepting: bool, nonce: int, fees: Fees) -> Transaction:
    """``RunnerHeartbeat(accepting)``: HEALTHY when accepting, PAUSED otherwise."""
    return build_tx(key, chain_id, RunnerHeartbeat(accepting), nonce=nonce, fees=fees)


def build_register(key: RunnerKey, chain_id: str, *, stake: int, capabilities: Capabilities, rate_card: RateCard,
                   nonce: int, fees: Fees) -> Transaction:
    """``RunnerRegister(stake, capabilities, rate_card)`` with the registration cycles limit."""
    return build_tx(key, chain_id, RunnerRegister(stake, capabilities, rate_card), nonce=nonce, fees=fees,
                    cycles_limit=REGISTER_CYCLES_LIMIT)


def build_update_capabilities(key: RunnerKey, chain_id: str, *, capabilities: Capabilities, nonce: int,
                              fees: Fees) -> Transaction:
    """``RunnerUpdateCapabilities(capabilities)``."""
    return build_tx(key, chain_id, RunnerUpdateCapabilities(capabilities), nonce=nonce, fees=fees)


def build_update_rate_card(key: RunnerKey, chain_id: str, *, rate_card: RateCard, nonce: int,
                           fees: Fees) -> Transaction:
    """``RunnerUpdateRateCard(rate_card)``."""
    return build_tx(key, chain_id, RunnerUpdateRateCard(rate_card), nonce=nonce, fees=fees)


def build_deregister(key: RunnerKey, chain_id: str, *, nonce: int, fees: Fees) -> Transaction:
    """``RunnerDeregister()``: leave the registry; the stake returns after unbonding."""
    return build_tx(key, chain_id, RunnerDeregister(), nonce=nonce, fees=fees)
