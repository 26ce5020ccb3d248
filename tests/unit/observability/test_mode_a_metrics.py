"""``cowboy_presence_certificates_total{outcome}``: one count per Mode A certificate in a committed block, labelled
``accepted`` or with its refusal code; exported at 0 for every code from the start."""

from __future__ import annotations

from cowboy_node.execution import presence_certificates as pc
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Receipt
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.presence_instructions import SubmitPresenceCertificate
from tests.helpers import BOB, BOB_SK, make_tx
from tests.unit.execution.test_mode_a_certificates import receipt


def _receipt(code: str | None) -> Receipt:
    return Receipt(status=STATUS_FAILED if code else STATUS_SUCCESS, cycles_used=1, cells_used=1, fee_paid=1,
                   error_code=code, events=(), error_message="m" if code else None)


def test_each_certificate_outcome_is_counted_and_other_transactions_are_not() -> None:
    m = NodeMetrics()
    cert = SubmitPresenceCertificate(BOB, (receipt(0),))
    txs = [make_tx(BOB_SK, i, cert) for i in range(3)] + [make_tx(BOB_SK, 3, Transfer(BOB, 1))]
    m.observe_presence_certificates(txs, [_receipt(None), _receipt(pc.R_DUPLICATE), _receipt(pc.R_DUPLICATE),
                                          _receipt("insufficient_balance")])

    def value(outcome: str) -> float | None:
        return m.registry.get_sample_value("cowboy_presence_certificates_total", {"outcome": outcome})

    assert value("accepted") == 1
    assert value(pc.R_DUPLICATE) == 2
    assert value("insufficient_balance") is None  # the transfer's failure is not a certificate outcome
    for code in pc.REFUSAL_CODES:
        assert value(code) is not None
    assert value(pc.R_FOREIGN_EPOCH) == 0
