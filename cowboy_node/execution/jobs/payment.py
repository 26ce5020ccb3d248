"""Job payment, refund and slashing amounts (CIP-2 settlement; DESIGN.md §4 "Runner registry and jobs").

``max_price + tip`` is escrowed at submission. On a verified result the escrow
is divided, to the last wei, into the runners' share, the burn, the treasury
share and the refund (docs/verification.md §6); on failure it is refunded whole.
Integer arithmetic only; every rounding remainder has a named destination.
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.types.fields import U128_MAX
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.validation_errors import ValidationError

CODE = "invalid_settlement"
"""ValidationError code for impossible settlement inputs (a caller bug)."""


def _amount(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U128_MAX:
        raise ValidationError(CODE, f"{name} must be an integer in [0, 2^128)", field=name)
    return value


@dataclass(frozen=True, slots=True)
class Settlement:
    """Where a verified job's escrow goes; the parts sum to ``max_price + tip`` exactly."""

    per_runner: tuple[tuple[bytes, int], ...]
    """(runner, amount) for each paid runner, in committee order."""
    burned: int
    """Burned (removed from supply)."""
    treasury: int
    """Credited to the treasury."""
    refund: int
    """Returned to the payer: ``(max_price + tip) − payment``."""

    def total(self) -> int:
        """Sum of every part (equals the escrow)."""
        return sum(a for _r, a in self.per_runner) + self.burned + self.treasury + self.refund


def usage_price(rate_base: int, rate_per_unit: int, units: int) -> int:
    """Price of one job on a rate card: ``rate_base + rate_per_unit · units``."""
    return _amount(rate_base, "rate_base") + _amount(rate_per_unit, "rate_per_unit") * _amount(units, "units")


def settle(max_price: int, tip: int, price: int, paid: tuple[bytes, ...], cfg: RunnerConfig) -> Settlement:
    """Divide the escrow of a verified job.

    payment = min(price, max_price) + tip; runners = payment · payment_runner_permille // 1000, split equally
    among ``paid`` (committee order) with the remainder of that split to the first; burned = payment ·
    payment_burn_permille // 1000; treasury = payment − runners − burned (so it absorbs both permille
    roundings); refund = (max_price + tip) − payment.
    """
    max_price = _amount(max_price, "max_price")
    tip = _amount(tip, "tip")
    price = _amount(price, "price")
    if not paid:
        raise ValidationError(CODE, "a verified job pays at least one runner", field="paid")
    if len(set(paid)) != len(paid):
        raise ValidationError(CODE, "a runner appears twice in paid", field="paid")
    payment = min(price, max_price) + tip
    runners_total = payment * cfg.payment_runner_permille // 1000
    burned = payment * cfg.payment_burn_permille // 1000
    treasury = payment - runners_total - burned
    each, remainder = divmod(runners_total, len(paid))
    per_runner = tuple((r, each + (remainder if i == 0 else 0)) for i, r in enumerate(paid))
    return Settlement(per_runner=per_runner, burned=burned, treasury=treasury, refund=max_price + tip - payment)


def fail_refund(max_price: int, tip: int) -> int:
    """Refund of a failed job: the whole escrow, ``max_price + tip``."""
    return _amount(max_price, "max_price") + _amount(tip, "tip")


def slash_amount(stake: int, cfg: RunnerConfig) -> int:
    """Stake slashed for commit-without-reveal: ``stake · slash_permille // 1000``."""
    return _amount(stake, "stake") * cfg.slash_permille // 1000
