"""Key files: 0600 atomic writes, round trips, overwrite refusal, and strict validation on load."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.crypto.bls import secret_key_to_bytes
from cowboy_node.node.keys import ValidatorKey, load_validator_key, write_validator_key
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import (
    KeyFileError,
    load_account_key,
    load_account_private_key,
    new_account_key,
    write_account_key,
)

SK = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
VKEY = ValidatorKey(ed25519_seed=bytes(range(32)), bls_secret=secret_key_to_bytes(12345), bls_share_index=1)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _no_temp_files(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_account_key_round_trip_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "a.key"
    address = write_account_key(path, SK)
    assert address == private_key_to_address(SK)
    assert _mode(path) == 0o600
    doc = json.loads(path.read_text())
    assert doc == {"type": "secp256k1", "private_key": "0x" + SK.hex(), "address": to_checksum_address(address)}
    assert load_account_key(path) == address
    assert load_account_private_key(path) == (SK, address)
    assert _no_temp_files(tmp_path)


def test_mode_is_0600_even_with_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        write_account_key(tmp_path / "a.key", SK)
        write_validator_key(tmp_path / "v.key", VKEY)
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.key") == 0o600
    assert _mode(tmp_path / "v.key") == 0o600


def test_new_account_key(tmp_path: Path) -> None:
    path = tmp_path / "new.key"
    address = new_account_key(path)
    assert len(address) == 20
    assert _mode(path) == 0o600
    assert load_account_key(path) == address
    assert new_account_key(tmp_path / "other.key") != address


def test_overwrite_refused_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "a.key"
    path.write_text("precious")
    with pytest.raises(FileExistsError, match=str(path)):
        write_account_key(path, SK)
    with pytest.raises(FileExistsError, match=str(path)):
        new_account_key(path)
    with pytest.raises(FileExistsError, match=str(path)):
        write_validator_key(path, VKEY)
    assert path.read_text() == "precious"
    assert _no_temp_files(tmp_path)
    write_account_key(path, SK, overwrite=True)
    assert load_account_key(path) == private_key_to_address(SK)
    assert _mode(path) == 0o600
    write_validator_key(path, VKEY, overwrite=True)
    assert load_validator_key(path) == VKEY


def test_invalid_private_key_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_account_key(tmp_path / "a.key", bytes(32))
    assert not (tmp_path / "a.key").exists()
    assert _no_temp_files(tmp_path)


def test_validator_key_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "validator.key"
    write_validator_key(path, VKEY)
    assert _mode(path) == 0o600
    assert json.loads(path.read_text()) == {
        "type": "cowboy-validator", "ed25519_seed": "0x" + VKEY.ed25519_seed.hex(),
        "bls_secret": "0x" + VKEY.bls_secret.hex(), "bls_share_index": 1}
    assert load_validator_key(path) == VKEY
    assert "bls_secret=<redacted>" in repr(VKEY)
    assert VKEY.bls_secret.hex() not in repr(VKEY)


def test_validator_key_dataclass_checks_lengths() -> None:
    with pytest.raises(ValueError):
        ValidatorKey(ed25519_seed=b"\x00" * 31, bls_secret=VKEY.bls_secret, bls_share_index=1)
    with pytest.raises(ValueError):
        ValidatorKey(ed25519_seed=VKEY.ed25519_seed, bls_secret=b"\x01", bls_share_index=1)
    with pytest.raises(ValueError):
        ValidatorKey(ed25519_seed=VKEY.ed25519_seed, bls_secret=VKEY.bls_secret, bls_share_index=0)


def _account_doc() -> dict[str, Any]:
    return {"type": "secp256k1", "private_key": "0x" + SK.hex(),
            "address": to_checksum_address(private_key_to_address(SK))}


def _write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    os.chmod(path, 0o600)
    return path


@pytest.mark.parametrize(("change", "problem"), [
    ({"address": to_checksum_address(b"\x01" * 20)}, "does not match"),
    ({"address": "0x" + "00" * 19}, "address"),
    ({"address": None}, "address"),
    ({"type": "ed25519"}, "type"),
    ({"type": None}, "type"),
    ({"private_key": "0x" + "zz" * 32}, "hex"),
    ({"private_key": SK.hex()}, "0x"),
    ({"private_key": "0x" + SK.hex()[:-2]}, "32 bytes"),
    ({"private_key": "0x" + SK.hex() + "00"}, "32 bytes"),
    ({"private_key": "0x" + SK.hex()[:-1]}, "hex"),
    ({"private_key": "0x" + "00" * 32}, "valid secp256k1"),
    ({"private_key": "0x " + SK.hex()[1:]}, "hex"),
    ({"private_key": 5}, "private_key"),
])
def test_account_key_validation(tmp_path: Path, change: dict[str, Any], problem: str) -> None:
    doc = _account_doc()
    doc.update(change)
    path = _write(tmp_path / "bad.key", doc)
    with pytest.raises(KeyFileError, match=problem) as info:
        load_account_key(path)
    assert str(path) in str(info.value)
    assert info.value.path == path


@pytest.mark.parametrize("content", ["not json", "[1, 2]", ""])
def test_account_key_not_a_json_object(tmp_path: Path, content: str) -> None:
    path = _write(tmp_path / "bad.key", content)
    with pytest.raises(KeyFileError, match=str(path)):
        load_account_key(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        load_account_key(tmp_path / "missing.key")
    with pytest.raises(KeyFileError, match="not a regular file"):
        load_validator_key(tmp_path)


def test_world_readable_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.key"
    write_account_key(path, SK)
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match=f"chmod 600 {path}"):  # issue 22: a refusal, no longer a warning
        load_account_key(path)


@pytest.mark.parametrize(("change", "problem"), [
    ({"type": "secp256k1"}, "type"),
    ({"ed25519_seed": "0x" + "00" * 31}, "ed25519_seed must be 32 bytes"),
    ({"ed25519_seed": "0xnothex"}, "ed25519_seed"),
    ({"bls_secret": "0x" + "00" * 32}, "bls_secret"),
    ({"bls_secret": "0x" + "ff" * 32}, "bls_secret"),
    ({"bls_secret": None}, "bls_secret"),
    ({"bls_share_index": 0}, "bls_share_index"),
    ({"bls_share_index": "1"}, "bls_share_index"),
    ({"bls_share_index": True}, "bls_share_index"),
])
def test_validator_key_validation(tmp_path: Path, change: dict[str, Any], problem: str) -> None:
    doc = {"type": "cowboy-validator", "ed25519_seed": "0x" + VKEY.ed25519_seed.hex(),
           "bls_secret": "0x" + VKEY.bls_secret.hex(), "bls_share_index": 1}
    doc.update(change)
    path = _write(tmp_path / "validator.key", doc)
    with pytest.raises(KeyFileError, match=problem) as info:
        load_validator_key(path)
    assert str(path) in str(info.value)


def test_key_file_error_is_a_value_error() -> None:
    assert issubclass(KeyFileError, ValueError)
