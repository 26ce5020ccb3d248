"""Job payment, refund and slashing (docs/verification.md §6): default split runner 89% / burn 10% / treasury 1%."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_node.execution.jobs.payment import Settlement, fail_refund, settle, slash_amount, usage_price
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.validation_errors import ValidationError

CFG = RunnerConfig()
A, B, C = (bytes([i]) * 20 for i in (0xA, 0xB, 0xC))


def test_default_split_is_89_10_1() -> None:
    assert (CFG.payment_runner_permille, CFG.payment_burn_permille, CFG.slash_permille) == (890, 100, 100)


def test_usage_price_is_base_plus_rate_times_units() -> None:
    assert usage_price(100, 7, 3) == 121
    assert usage_price(0, 0, 10**6) == 0
    assert usage_price(5, 2, 0) == 5


def test_settle_worked_example_three_runners_with_remainder_to_first() -> None:
    # payment = min(700, 1000) + 100 = 800; runners = 800·890//1000 = 712 = 3·237 + 1;
    # burn = 800·100//1000 = 80; treasury = 800 − 712 − 80 = 8; refund = 1100 − 800 = 300.
    s = settle(1000, 100, 700, (A, B, C), CFG)
    assert s == Settlement(per_runner=((A, 238), (B, 237), (C, 237)), burned=80, treasury=8, refund=300)
    assert s.total() == 1100


def test_settle_caps_the_price_at_max_price() -> None:
    # payment = min(5000, 1000) + 0 = 1000 → 890 / 100 / 10, nothing refunded.
    assert settle(1000, 0, 5000, (A,), CFG) == Settlement(((A, 890),), burned=100, treasury=10, refund=0)


def test_settle_treasury_absorbs_permille_rounding() -> None:
    # payment = 999: runners = 889110//1000 = 889; burn = 99900//1000 = 99; treasury = 999 − 889 − 99 = 11.
    assert settle(999, 0, 999, (B,), CFG) == Settlement(((B, 889),), burned=99, treasury=11, refund=0)


def test_settle_tip_is_always_paid_and_unused_escrow_refunded() -> None:
    # payment = 0 + 10 = 10: runners 8 (split 4 + 4), burn 1, treasury 1; refund = 510 − 10 = 500.
    assert settle(500, 10, 0, (A, B), CFG) == Settlement(((A, 4), (B, 4)), burned=1, treasury=1, refund=500)


def test_settle_with_governed_split() -> None:
    cfg = RunnerConfig(payment_runner_permille=500, payment_burn_permille=500)
    assert settle(100, 0, 100, (A, B, C), cfg) == Settlement(((A, 18), (B, 16), (C, 16)), burned=50, treasury=0,
                                                             refund=0)


def test_fail_refund_returns_the_whole_escrow() -> None:
    assert fail_refund(1000, 5) == 1005
    assert fail_refund(0, 0) == 0


def test_slash_amount_is_slash_permille_of_stake() -> None:
    assert slash_amount(10**18, CFG) == 10**17
    assert slash_amount(999, CFG) == 99
    assert slash_amount(0, CFG) == 0


@pytest.mark.parametrize("args", [
    (1000, 0, 10, ()),                # nobody to pay
    (1000, 0, 10, (A, A)),            # runner twice
    (-1, 0, 10, (A,)),
    (10, -1, 10, (A,)),
    (10, 0, -1, (A,)),
    (True, 0, 1, (A,)),
    (2**128, 0, 1, (A,)),
])
def test_settle_refuses_impossible_inputs(args: tuple[int, int, int, tuple[bytes, ...]]) -> None:
    with pytest.raises(ValidationError) as info:
        settle(*args, CFG)
    assert info.value.code == "invalid_settlement"


_amounts = st.integers(0, 2**128 - 1)


@settings(max_examples=400, deadline=None)
@given(max_price=_amounts, tip=_amounts, price=_amounts, n=st.integers(1, 9),
       runner_pm=st.integers(0, 1000), burn_pm=st.integers(0, 1000))
def test_settle_conserves_the_escrow_exactly(max_price: int, tip: int, price: int, n: int, runner_pm: int,
                                             burn_pm: int) -> None:
    if runner_pm + burn_pm > 1000:
        burn_pm = 1000 - runner_pm
    cfg = RunnerConfig(payment_runner_permille=runner_pm, payment_burn_permille=burn_pm)
    paid = tuple(bytes([i + 1]) * 20 for i in range(n))
    s = settle(max_price, tip, price, paid, cfg)
    assert sum(a for _r, a in s.per_runner) + s.burned + s.treasury + s.refund == max_price + tip
    payment = min(price, max_price) + tip
    assert s.refund == max_price + tip - payment
    assert s.burned == payment * burn_pm // 1000
    assert sum(a for _r, a in s.per_runner) == payment * runner_pm // 1000
    assert min(s.burned, s.treasury, s.refund) >= 0
    amounts = [a for _r, a in s.per_runner]
    assert [r for r, _a in s.per_runner] == list(paid)
    assert all(a == amounts[1] for a in amounts[1:]) and 0 <= amounts[0] - amounts[-1] < n
