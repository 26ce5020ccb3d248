"""Key files both daemons read and write: account (secp256k1) keys, and the rules every secret file follows.

Files are written atomically with mode 0600: the JSON goes to a temporary
file in the same directory (created 0600, fsynced) which is then moved into
place, so a crash never leaves a partial key file. Existing files are never
overwritten unless ``overwrite=True``.

Reading refuses a key file that group or others may access in any way (any bit
of 0o077): the error names the file and the ``chmod 600 PATH`` that fixes it
(:func:`check_secret_mode`, also used for the node's other secrets).

Account key file::

    {"type": "secp256k1", "private_key": "0x<64 hex>", "address": "0x<EIP-55>"}
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from cowboy_protocol.crypto.address import parse_address, to_checksum_address
from cowboy_protocol.crypto.secp256k1 import generate_private_key, private_key_to_address

ACCOUNT_KEY_TYPE = "secp256k1"
"""``type`` of an account key file."""
MAX_KEY_FILE_BYTES = 64 * 1024
"""Largest key file read (a key file is a few hundred bytes; anything bigger is not one)."""

StrPath = str | os.PathLike[str]
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class KeyFileError(ValueError):
    """A key file that cannot be read or is not valid; the message names the file and the problem."""

    def __init__(self, path: StrPath, problem: str) -> None:
        super().__init__(f"key file {os.fspath(path)}: {problem}")
        self.path = Path(path)
        self.problem = problem


# -- atomic 0600 write ----------------------------------------------------------------
def fsync_dir(directory: Path) -> None:
    """fsync ``directory`` so a file just created or renamed in it survives a crash (best effort)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def write_secret_json(path: StrPath, doc: dict[str, Any], *, overwrite: bool) -> None:
    """Write ``doc`` to ``path`` atomically with mode 0600."""
    target = Path(path)
    if not overwrite and (target.exists() or target.is_symlink()):
        raise FileExistsError(f"key file {target} already exists; refusing to overwrite it")
    data = (json.dumps(doc, indent=2) + "\n").encode()
    directory = target.parent
    tmp = directory / f".{target.name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # exact mode regardless of umask
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # atomic and fails if the target appeared meanwhile
            except FileExistsError:
                raise FileExistsError(f"key file {target} already exists; refusing to overwrite it") from None
            except OSError:  # filesystems without hard links
                if target.exists():
                    raise FileExistsError(f"key file {target} already exists; refusing to overwrite it") from None
                os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(directory)


# -- reading helpers ------------------------------------------------------------------
def secret_mode_problem(path: StrPath, mode: int) -> str | None:
    """Why a secret file with permission bits ``mode`` is refused (group or others have any access), else None."""
    mode = stat.S_IMODE(mode)
    if mode & 0o077:
        return f"mode {mode:04o} lets group or others access the key; run `chmod 600 {os.fspath(path)}`"
    return None


def check_secret_mode(path: StrPath) -> None:
    """Raise KeyFileError unless ``path`` is a regular file only its owner may access (the message says
    ``chmod 600 PATH``)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise KeyFileError(p, "file does not exist") from None
    except OSError as e:
        raise KeyFileError(p, f"cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(p, "not a regular file")
    problem = secret_mode_problem(p, st.st_mode)
    if problem is not None:
        raise KeyFileError(p, problem)


def read_key_json(path: StrPath, expected_type: str) -> dict[str, Any]:
    """The JSON object of a key file of type ``expected_type``: size, regular file, 0600 and shape checked."""
    p = Path(path)
    try:
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(p, "not a regular file")
        if st.st_size > MAX_KEY_FILE_BYTES:
            raise KeyFileError(p, f"file is larger than {MAX_KEY_FILE_BYTES} bytes")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise KeyFileError(p, "file does not exist") from None
    except OSError as e:
        raise KeyFileError(p, f"cannot read: {e.strerror or e}") from None
    problem = secret_mode_problem(p, st.st_mode)
    if problem is not None:
        raise KeyFileError(p, problem)
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise KeyFileError(p, f"not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise KeyFileError(p, "expected a JSON object")
    kind = doc.get("type")
    if kind != expected_type:
        raise KeyFileError(p, f"type is {kind!r}, expected {expected_type!r}")
    return doc


def hex_field(path: StrPath, doc: dict[str, Any], name: str, length: int) -> bytes:
    """Field ``name`` of a key file: 0x-prefixed hex of exactly ``length`` bytes, else KeyFileError."""
    value = doc.get(name)
    if not isinstance(value, str):
        raise KeyFileError(path, f"{name} is missing or not a string")
    if not value.startswith("0x"):
        raise KeyFileError(path, f"{name} must be 0x-prefixed hex")
    body = value[2:]
    if len(body) % 2 or any(c not in _HEX_DIGITS for c in body):
        raise KeyFileError(path, f"{name} is not valid hex")
    data = bytes.fromhex(body)
    if len(data) != length:
        raise KeyFileError(path, f"{name} must be {length} bytes, got {len(data)}")
    return data


# -- account keys ---------------------------------------------------------------------
def write_account_key(path: StrPath, private_key: bytes, *, overwrite: bool = False) -> bytes:
    """Write a secp256k1 account key file; returns the account address (20 bytes)."""

    address = private_key_to_address(bytes(private_key))  # validates the key
    doc = {"type": ACCOUNT_KEY_TYPE, "private_key": "0x" + bytes(private_key).hex(),
           "address": to_checksum_address(address)}
    write_secret_json(path, doc, overwrite=overwrite)
    return address


def load_account_private_key(path: StrPath) -> tuple[bytes, bytes]:
    """``(private_key, address)`` from an account key file; raises KeyFileError."""

    doc = read_key_json(path, ACCOUNT_KEY_TYPE)
    sk = hex_field(path, doc, "private_key", 32)
    try:
        address = private_key_to_address(sk)
    except ValueError as e:
        raise KeyFileError(path, f"private_key is not a valid secp256k1 key: {e}") from None
    text = doc.get("address")
    if not isinstance(text, str):
        raise KeyFileError(path, "address is missing or not a string")
    try:
        stated = parse_address(text)
    except ValueError as e:
        raise KeyFileError(path, f"address is invalid: {e}") from None
    if stated != address:
        raise KeyFileError(path, "address does not match the private key")
    return sk, address


def load_account_key(path: StrPath) -> bytes:
    """The address of the account key in ``path`` (validated against its private key)."""
    return load_account_private_key(path)[1]


def new_account_key(path: StrPath) -> bytes:
    """Generate a fresh account key, write it to ``path`` and return its address."""

    return write_account_key(path, generate_private_key())
