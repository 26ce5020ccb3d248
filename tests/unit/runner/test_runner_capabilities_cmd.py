"""Issue 37 item 1 and 7 on the runner side, without a node: ``cowboy-runner capabilities`` edits runner.toml's
allow-list and private-address setting together (keeping its comments), ``status`` says what the runner refuses
and which key decides it, the executor's refusals name the setting, and ``status | head`` ends quietly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cowboy_protocol.types.jobspec import HttpJob
from cowboy_runner.cli import main
from cowboy_runner.config import load_settings, parse_settings
from cowboy_runner.executors import ExecutorError, HttpConfig, HttpExecutor
from cowboy_runner.policy import is_local_host, refusal_lines, refusal_policy
from cowboy_runner.status import write_status
from cowboy_runner.toml_edit import set_key

pytestmark = pytest.mark.timeout(300)
UNREACHABLE = "http://127.0.0.1:9"  # discard port: nothing listens (the chain step is skipped or refused)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "runner-home"
    assert main(["init", "--home", str(h), "--validator-rpc", UNREACHABLE]) == 0
    return h


def test_adding_a_loopback_host_also_allows_private_addresses_and_keeps_comments(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (home / "runner.toml").read_text()
    capsys.readouterr()
    assert main(["capabilities", "--home", str(home), "--http-domain", "127.0.0.1", "--no-chain"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] == ["http_domains", "allow_private_addresses"], out
    settings = load_settings(home)
    assert settings.capabilities.http_domains == ("127.0.0.1", "example.com")
    assert settings.executors.http.allow_private_addresses is True
    after = (home / "runner.toml").read_text()
    comments = [line for line in before.splitlines() if line.startswith("#")]
    assert comments == [line for line in after.splitlines() if line.startswith("#")]  # nothing else rewritten


def test_a_public_host_leaves_private_addresses_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capabilities", "--home", str(home), "--http-domain", "api.example.org", "--no-chain"]) == 0
    assert load_settings(home).executors.http.allow_private_addresses is False


def test_deny_with_a_local_host_is_refused_and_changes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (home / "runner.toml").read_text()
    rc = main(["capabilities", "--home", str(home), "--http-domain", "localhost", "--private-addresses", "deny",
               "--no-chain"])
    assert rc == 2
    assert "localhost would then be refused" in capsys.readouterr().err
    assert (home / "runner.toml").read_text() == before


def test_an_invalid_host_is_refused_naming_the_key_and_changes_nothing(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (home / "runner.toml").read_text()
    assert main(["capabilities", "--home", str(home), "--http-domain", "bad host!", "--no-chain"]) == 2
    assert "capabilities.http_domains" in capsys.readouterr().err
    assert (home / "runner.toml").read_text() == before


def test_chain_step_reports_an_unreachable_validator(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capabilities", "--home", str(home), "--http-domain", "127.0.0.1"]) == 4
    err = capsys.readouterr().err
    assert "runner.validator_rpc: cannot reach node" in err
    assert "runner.toml is already changed: rerun `cowboy-runner capabilities" in err  # what is left to do


def test_set_key_replaces_inserts_or_appends_within_the_section() -> None:
    text = "[a]\nx = 1\n# keep\n[b]\nx = 2\n"
    assert set_key(text, "b", "x", True) == "[a]\nx = 1\n# keep\n[b]\nx = true\n"
    assert set_key(text, "a", "y", ["h"]) == '[a]\ny = ["h"]\nx = 1\n# keep\n[b]\nx = 2\n'
    assert set_key(text, "c", "z", False) == text + "\n[c]\nz = false\n"


def test_local_hosts_are_the_ones_needing_private_addresses() -> None:
    assert all(is_local_host(h) for h in ("127.0.0.1", "localhost", "api.localhost", "10.1.2.3", "::1", "192.168.0.9"))
    assert not any(is_local_host(h) for h in ("example.com", "8.8.8.8", "*"))


def test_status_lines_name_the_keys_that_refuse(home: Path) -> None:
    policy = refusal_policy(load_settings(home))
    lines = refusal_lines(policy, {"job_types": ["http"], "http_domains": ["127.0.0.1"]}, policy, "H")
    assert any("http hosts other than example.com (capabilities.http_domains" in line for line in lines), lines
    assert any("executors.http.allow_private_addresses = false" in line for line in lines), lines
    mismatch = [line for line in lines if line.startswith("PROBLEM") and "http_domains" in line]
    assert mismatch and "['127.0.0.1']" in mismatch[0] and "['example.com']" in mismatch[0], lines
    changed = {**policy, "http_domains": ["127.0.0.1", "example.com"]}
    assert any(line.startswith("restart:") for line in refusal_lines(policy, None, changed, "H"))
    agreed = {"job_types": ["http"], "http_domains": ["example.com"]}
    assert not any(line.startswith(("PROBLEM", "restart")) for line in refusal_lines(policy, agreed, policy, "H"))


def test_served_local_host_with_private_addresses_refused_is_a_problem() -> None:
    policy = {"job_types": ["http"], "http_domains": ["127.0.0.1"], "allow_private_addresses": False}
    lines = refusal_lines(policy, None, None, "H")
    assert any(line.startswith("PROBLEM:    127.0.0.1 is served but private addresses are refused") for line in lines)


async def test_executor_refusals_name_the_setting_to_change() -> None:
    executor = HttpExecutor(HttpConfig(allowed_domains=("example.com",)), max_output_bytes=1024)
    with pytest.raises(ExecutorError) as info:
        await executor.execute(HttpJob(url="http://127.0.0.1:8000/data.json"), None, deadline_s=5.0)
    assert info.value.code == "domain_not_allowed"
    assert "capabilities.http_domains" in info.value.message
    assert "cowboy-runner capabilities --home HOME --http-domain 127.0.0.1" in info.value.message
    executor = HttpExecutor(HttpConfig(allowed_domains=("127.0.0.1",)), max_output_bytes=1024)
    with pytest.raises(ExecutorError) as info:
        await executor.execute(HttpJob(url="http://127.0.0.1:8000/data.json"), None, deadline_s=5.0)
    assert info.value.code == "address_not_allowed"
    assert "executors.http.allow_private_addresses = false" in info.value.message


def test_status_into_a_closed_pipe_ends_quietly(home: Path) -> None:
    # `cowboy-runner status | head`: the reader is gone before the writer prints (held explicitly: the read end
    # is closed before the process starts), which used to end in a BrokenPipeError traceback.
    settings = parse_settings((home / "runner.toml").read_text(), home)
    doc = {"pid": os.getpid(), "updated_at": time.time(), "address": "0x00", "chain_id": "c", "head": 1,
           "sessions": [], "last_results": [], "policy": refusal_policy(settings)}
    write_status(settings.journal_path.parent, doc)
    r, w = os.pipe()
    os.close(r)
    proc = subprocess.run([sys.executable, "-m", "cowboy_runner.cli", "status", "--home", str(home)], stdout=w,
                          stderr=subprocess.PIPE, timeout=30, check=False)
    os.close(w)
    assert proc.returncode == -signal.SIGPIPE, proc.stderr
    assert proc.stderr == b""
