"""Result commitments of the commit/reveal settlement (CIP-2): what a runner commits to before it reveals.

Both the runner (which builds ``JobResultCommit``) and the verifier (which checks the reveal against it) use
this one definition.
"""

from __future__ import annotations

from cowboy_protocol.crypto.keccak import keccak256

COMMIT_DOMAIN = b"cowboy-result-commit-v1:"
"""Domain of result commitments (project choice, docs/jobs.md)."""


def result_commitment(job_id: bytes, runner: bytes, result: bytes, salt: bytes) -> bytes:
    """commitment = keccak256(COMMIT_DOMAIN ‖ job_id ‖ runner ‖ u32_be(len(result)) ‖ result ‖ salt)."""
    return keccak256(COMMIT_DOMAIN + job_id + runner + len(result).to_bytes(4, "big") + result + salt)
