"""The runner's secp256k1 identity key.

The file is the shared account key file (``cowboy_protocol.keys``: ``{"type": "secp256k1", "private_key",
"address"}``, written atomically with mode 0600, never overwritten), so ``cowboy-node tx … --key`` accepts it
too. The runner is stricter than the node on reading: a key file that group or others can read, write or
execute is refused (the node only warns), because this key signs result transactions that carry stake.

The runner's on-chain identity is the address the node derives from the key (last 20 bytes of keccak256 of the
uncompressed public key); its CIP-11 transport identity is the 33-byte compressed public key.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.secp256k1 import generate_private_key, private_key_to_address, private_key_to_public_key
from cowboy_protocol.keys import KeyFileError, load_account_private_key, write_account_key

__all__ = ["KeyFileError", "RunnerKey", "create_key", "load_key"]


@dataclass(frozen=True, slots=True)
class RunnerKey:
    """The runner's private key and the identities derived from it."""

    private_key: bytes
    """32-byte secp256k1 secret (never printed: see ``__repr__``)."""
    address: bytes
    """20-byte account address: the runner's identity in the Runner Registry and the sender of its txs."""

    def __post_init__(self) -> None:
        if private_key_to_address(self.private_key) != self.address:
            raise ValueError("address does not belong to the private key")

    @classmethod
    def from_private_key(cls, private_key: bytes) -> RunnerKey:
        """Derive the address from ``private_key`` (raises ValueError for an invalid key)."""
        return cls(bytes(private_key), private_key_to_address(bytes(private_key)))

    @property
    def checksum_address(self) -> str:
        """EIP-55 text of :attr:`address`."""
        return to_checksum_address(self.address)

    @property
    def public_key(self) -> bytes:
        """33-byte compressed public key (the CIP-11 ``runner_pubkey`` without its scheme tag 0x01)."""
        return private_key_to_public_key(self.private_key, compressed=True)

    def __repr__(self) -> str:  # never leak the secret into logs
        return f"RunnerKey(address={self.checksum_address}, private_key=<redacted>)"


def create_key(path: Path | str) -> RunnerKey:
    """Generate a key and write it to ``path`` (mode 0600). Raises FileExistsError if ``path`` exists."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    sk = generate_private_key()
    write_account_key(target, sk, overwrite=False)
    return RunnerKey.from_private_key(sk)


def load_key(path: Path | str) -> RunnerKey:
    """Read the key at ``path``; raises KeyFileError naming the file and the problem.

    Refused: a missing file, anything but a regular file, any permission bit for group or others
    (``chmod 600`` fixes it), and whatever the node's key reader refuses (bad JSON, wrong type, an address
    that does not match the key).
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise KeyFileError(p, "file does not exist; run `cowboy-runner init` first") from None
    except OSError as e:
        raise KeyFileError(p, f"cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(p, "not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise KeyFileError(p, f"mode {mode:04o} lets group or others access the key; run `chmod 600 {p}`")
    sk, address = load_account_private_key(p)
    return RunnerKey(sk, address)
