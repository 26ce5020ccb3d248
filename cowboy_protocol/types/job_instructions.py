"""Job instructions: JobSubmit (0x30), JobResultCommit (0x31), JobResultSubmit (0x32).

Map layouts (``{0: kind, 1..: fields}``, docs/jobs.md):

    JobSubmit       {0: 0x30, 1: JobRequest map}
    JobResultCommit {0: 0x31, 1: job_id bytes(32), 2: commitment bytes(32)}
    JobResultSubmit {0: 0x32, 1: job_id bytes(32), 2: result bytes(≤ 256 KiB), 3: salt bytes(≤ 32), 4: units u64}

The result instructions are signed by the runner (the transaction sender is the runner identity); they are
the ``SystemInstruction::JobResultCommit`` / ``JobResultSubmit`` of CIP-11 §10.3 whose ``tx_bytes`` the
transport carries unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cowboy_protocol.types.fields import HASH_LEN, expect_bytes, expect_uint
from cowboy_protocol.types.jobspec import JobRequest
from cowboy_protocol.types.jobspec_json import job_request_to_json

MAX_RESULT_BYTES = 256 * 1024
"""Largest revealed result."""
MAX_SALT_BYTES = 32
"""Longest commitment salt."""


@dataclass(frozen=True, slots=True)
class JobSubmit:
    """Submit an off-chain job; the chain fills job_id, submitter and submitted_at (JobSpecV1 keys 0, 8, 9)."""

    KIND: ClassVar[int] = 0x30
    NAME: ClassVar[str] = "job_submit"
    request: JobRequest
    """The job as the submitter describes it."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.request.to_cbor()}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> JobSubmit:
        """Build from a map already checked to hold exactly keys {0, 1}."""
        return cls(request=JobRequest.from_cbor(m[1]))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""

        return {"kind": self.NAME, "request": job_request_to_json(self.request)}


@dataclass(frozen=True, slots=True)
class JobResultCommit:
    """A committee member's commitment to its result (commit phase)."""

    KIND: ClassVar[int] = 0x31
    NAME: ClassVar[str] = "job_result_commit"
    job_id: bytes
    """The job (32 bytes)."""
    commitment: bytes
    """keccak256("cowboy-result-commit-v1:" ‖ job_id ‖ runner ‖ u32_be(len(result)) ‖ result ‖ salt)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.job_id, 2: self.commitment}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> JobResultCommit:
        """Build from a map already checked to hold exactly keys {0, 1, 2}."""
        return cls(job_id=expect_bytes(m[1], "instruction.job_id", HASH_LEN),
                   commitment=expect_bytes(m[2], "instruction.commitment", HASH_LEN))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "job_id": "0x" + self.job_id.hex(), "commitment": "0x" + self.commitment.hex()}


@dataclass(frozen=True, slots=True)
class JobResultSubmit:
    """A committee member's result (the reveal; for M == 1 it may come without a commitment)."""

    KIND: ClassVar[int] = 0x32
    NAME: ClassVar[str] = "job_result_submit"
    job_id: bytes
    """The job (32 bytes)."""
    result: bytes
    """The result bytes."""
    salt: bytes
    """The commitment salt (empty when there was no commitment)."""
    units: int
    """Usage units priced by the runner's rate card (tokens, bytes…: kind-specific)."""

    def fields(self) -> dict[int, Any]:
        """Instruction-specific map entries (keys 1..)."""
        return {1: self.job_id, 2: self.result, 3: self.salt, 4: self.units}

    @classmethod
    def from_fields(cls, m: Mapping[int, Any]) -> JobResultSubmit:
        """Build from a map already checked to hold exactly keys {0..4}."""
        return cls(job_id=expect_bytes(m[1], "instruction.job_id", HASH_LEN),
                   result=expect_bytes(m[2], "instruction.result", max_len=MAX_RESULT_BYTES),
                   salt=expect_bytes(m[3], "instruction.salt", max_len=MAX_SALT_BYTES),
                   units=expect_uint(m[4], "instruction.units"))

    def to_json(self) -> dict[str, Any]:
        """JSON view for the RPC."""
        return {"kind": self.NAME, "job_id": "0x" + self.job_id.hex(), "result": "0x" + self.result.hex(),
                "salt": "0x" + self.salt.hex(), "units": self.units}
