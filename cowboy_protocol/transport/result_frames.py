"""Checks on JobResultCommit / JobResult frames before their transaction is forwarded (CIP-11 §10.3).

The validator decodes ``tx_bytes`` with the node's normal transaction decoder and checks that (1) it is signed
by the runner that sent the frame, (2) its instruction is JobResultCommit for a JobResultCommit frame and
JobResultSubmit for a JobResult frame, and (3) the instruction's job_id equals the frame's. The normal
admission path (size, signature, nonce, limits, fees) then runs on the same bytes; the node never rebuilds,
amends or re-signs the transaction. A failed check is a protocol error on the session.
"""

from __future__ import annotations

from typing import Literal

from cowboy_protocol.transport.protocol_errors import RemoteProtocolError
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

FrameKind = Literal["commit", "result"]


def check_result_tx(tx_bytes: bytes, *, kind: FrameKind, job_id: bytes, runner_address: bytes,
                    max_tx_bytes: int | None = None) -> Transaction:
    """The decoded transaction, or ``RemoteProtocolError`` with a stable code naming the failed check:
    ``result_tx_malformed``, ``result_tx_bad_signature``, ``result_tx_wrong_signer``, ``result_tx_wrong_kind``,
    ``result_tx_wrong_job``."""
    try:
        tx = Transaction.from_bytes(tx_bytes, max_body=max_tx_bytes)
    except (DecodeError, ValidationError) as e:
        raise RemoteProtocolError("result_tx_malformed", f"tx_bytes do not decode: {e}") from None
    try:
        signer = tx.recover_sender()
    except (DecodeError, ValidationError, ValueError) as e:
        raise RemoteProtocolError("result_tx_bad_signature", f"tx signature does not recover: {e}") from None
    if signer != runner_address or tx.sender != runner_address:
        raise RemoteProtocolError("result_tx_wrong_signer", "the transaction is not signed by this session's runner")
    expected = JobResultCommit if kind == "commit" else JobResultSubmit
    ins = tx.instruction
    if not isinstance(ins, expected):
        raise RemoteProtocolError("result_tx_wrong_kind",
                                  f"a {kind} frame must carry a {expected.NAME} transaction, got {type(ins).__name__}")
    if ins.job_id != job_id:
        raise RemoteProtocolError("result_tx_wrong_job", "the transaction's job_id differs from the frame's")
    return tx
