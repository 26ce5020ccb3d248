"""File modes of the node's home (issue 22 item 7): ``init`` writes private directories and files whatever the
umask, and ``run`` refuses to start when a secret (validator key, QUIC TLS key) is accessible to group or others,
naming the file and the ``chmod 600`` that fixes it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.node import startup as runner_module
from cowboy_node.node.keys import load_validator_key
from cowboy_protocol.keys import KeyFileError, check_secret_mode, load_account_key, write_account_key
from cowboy_protocol.quic.certs import ensure_certificate
from tests.unit.node_harness import run_cli

SK = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask0() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _init(home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    return run_cli(["init", "--home", str(home), "--chain-id", "cowboy-modes-1", "--block-time-ms", "250"], capsys)


def test_init_under_umask_000_writes_a_private_home(tmp_path: Path, umask0: None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "a" / "home"
    rc, out, _ = _init(home, capsys)
    assert rc == 0 and out["home"] == str(home)
    for d in (home, home / "keys", home / "data"):
        assert _mode(d) == 0o700, d
    for f in ("config.toml", "genesis.json", "keys/validator.key", "keys/faucet.key", "keys/fee_recipient.key"):
        assert _mode(home / f) == 0o600, f
    everything = [p for p in home.rglob("*")]
    assert all(_mode(p) & 0o077 == 0 for p in everything), [(p, oct(_mode(p))) for p in everything]


def test_init_leaves_an_existing_home_directory_mode_alone_but_warns(tmp_path: Path, umask0: None,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "shared"
    home.mkdir()
    os.chmod(home, 0o777)
    rc, _, err = _init(home, capsys)
    assert rc == 0
    assert _mode(home) == 0o777  # not ours to chmod (--home could be any directory)
    assert f"chmod 700 {home}" in err
    assert _mode(home / "keys") == 0o700 and _mode(home / "config.toml") == 0o600


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    assert _init(h, capsys)[0] == 0
    monkeypatch.setattr(runner_module, "configure_logging", lambda *a, **k: None)  # keep the test process's logging
    return h


def _run(home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc, _, err = run_cli(["run", "--home", str(home)], capsys)
    return rc, err


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o620, 0o604, 0o601])
def test_run_refuses_a_validator_key_group_or_others_can_access(home: Path, mode: int,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    key = home / "keys" / "validator.key"
    os.chmod(key, mode)
    rc, err = _run(home, capsys)
    assert rc == 1
    assert str(key) in err and f"chmod 600 {key}" in err and f"{mode:04o}" in err
    assert not (home / "data" / "CURRENT").exists()  # refused before the database was opened


def test_run_refuses_a_world_readable_quic_key(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ensure_certificate(home / "quic-cert.pem", home / "quic-key.pem", "cowboy-validator")
    key = home / "quic-key.pem"
    os.chmod(key, 0o644)
    rc, err = _run(home, capsys)
    assert rc == 1
    assert str(key) in err and f"chmod 600 {key}" in err
    assert not (home / "data" / "CURRENT").exists()


def test_quic_certificate_is_created_private_whatever_the_umask(tmp_path: Path, umask0: None) -> None:
    cert, key = tmp_path / "quic-cert.pem", tmp_path / "quic-key.pem"
    ensure_certificate(cert, key, "cowboy-validator")
    assert _mode(key) == 0o600 and _mode(cert) == 0o644
    check_secret_mode(key)
    os.chmod(key, 0o640)
    with pytest.raises(PermissionError, match=f"chmod 600 {key}"):
        ensure_certificate(cert, key, "cowboy-validator")


def test_key_files_group_or_others_can_access_are_refused_on_every_read(tmp_path: Path) -> None:
    path = tmp_path / "a.key"
    write_account_key(path, SK)
    assert load_account_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match=r"mode 0644 .*chmod 600") as info:
        load_account_key(path)
    assert info.value.path == path
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_validator_key(path)
    with pytest.raises(KeyFileError, match="does not exist"):
        check_secret_mode(tmp_path / "missing.pem")
    with pytest.raises(KeyFileError, match="not a regular file"):
        check_secret_mode(tmp_path)
