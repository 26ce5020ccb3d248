"""CIP-11 §12.6 "Enum discriminant bytes": every table is pinned; new variants may only be appended."""

from __future__ import annotations

from enum import IntEnum

import pytest

from cowboy_protocol.transport.enums import AckKind, CancelReason, FrameType, GoodbyeReason, RejectReason, Role, Scheme

PINNED: dict[type[IntEnum], dict[str, int]] = {
    Role: {"RUNNER": 0x01, "VALIDATOR": 0x02},
    Scheme: {"SECP256K1": 0x01, "ED25519": 0x02},
    FrameType: {"HELLO": 0x01, "HELLO_ACK": 0x02, "HEARTBEAT_PING": 0x10, "HEARTBEAT_PONG": 0x11,
                "BACKPRESSURE_SIGNAL": 0x12, "CAPABILITY_DELTA": 0x13, "JOB_ASSIGNMENT": 0x20, "JOB_ACK": 0x21,
                "JOB_PROGRESS": 0x22, "JOB_RESULT": 0x23, "JOB_CANCEL": 0x24, "JOB_RESULT_COMMIT": 0x25,
                "GOODBYE": 0xF0, "PRESENCE_RECEIPT_REQUEST": 0x14, "PRESENCE_RECEIPT": 0x15},
    AckKind: {"ACCEPTED": 0x01, "DUPLICATE": 0x02, "REJECT": 0x03},
    RejectReason: {"UNVERIFIABLE_ASSIGNMENT": 0x01, "AT_CAPACITY": 0x02, "UNSUPPORTED_JOB_TYPE": 0x03,
                   "DRAINING": 0x04, "INTERNAL": 0x05},
    CancelReason: {"RESELECTED": 0x01, "JOB_SETTLED": 0x02, "JOB_FAILED": 0x03, "EXPIRED": 0x04},
    GoodbyeReason: {"PROTOCOL_ERROR": 0x01, "UNSUPPORTED_VERSION": 0x02, "WRONG_CHAIN": 0x03,
                    "WRONG_VALIDATOR_SET": 0x04, "NOT_REGISTERED": 0x05, "DEREGISTERED": 0x06, "NOT_IN_SUBSET": 0x07,
                    "AUTH_FAILED": 0x08, "RATE_LIMITED": 0x09, "TOO_MANY_CONNECTIONS": 0x0A, "IDLE_TIMEOUT": 0x0B,
                    "SHUTDOWN": 0x0C, "REPLACED": 0x0D, "OVERLAP_EXPIRED": 0x0E},
}


@pytest.mark.parametrize("enum", list(PINNED), ids=lambda e: e.__name__)
def test_enum_discriminant_bytes_are_pinned(enum: type[IntEnum]) -> None:
    assert {m.name: m.value for m in enum} == PINNED[enum]


def test_project_enums_are_dense_from_one_so_appending_takes_the_next_byte() -> None:
    for enum in (AckKind, RejectReason, CancelReason, GoodbyeReason):
        assert sorted(m.value for m in enum) == list(range(1, len(enum) + 1))


def test_scheme_lengths_and_role_binding() -> None:
    assert (Scheme.SECP256K1.key_length, Scheme.SECP256K1.signature_length) == (33, 65)
    assert (Scheme.ED25519.key_length, Scheme.ED25519.signature_length) == (32, 64)
    assert Scheme.for_role(Role.RUNNER) is Scheme.SECP256K1
    assert Scheme.for_role(Role.VALIDATOR) is Scheme.ED25519
