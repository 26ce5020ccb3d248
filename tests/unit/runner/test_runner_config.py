"""runner.toml loading, init_home and the runner key file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cowboy_protocol.keys import KeyFileError, load_account_private_key, write_account_key
from cowboy_protocol.types.runner import JOB_KIND_HTTP, JOB_KIND_LLM, Rate
from cowboy_runner.config import (
    CONFIG_FILE,
    DEFAULT_KEY_FILE,
    ConfigError,
    init_home,
    load_settings,
    parse_settings,
    render_template,
)
from cowboy_runner.keyfile import RunnerKey, create_key, load_key

HASH = "ab" * 32
MINIMAL = """
[runner]
validator_rpc = "http://10.0.0.5:4000/"

[capabilities]
job_types = ["http"]
max_concurrent_jobs = 2

[rate_card.http]
base_price = "5"
price_per_unit = 1
"""


def _parse(extra: str = "", base: str = MINIMAL) -> object:
    return parse_settings(base + extra, Path("/home/r"))


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_settings(text, Path("/home/r"))
    return str(e.value)


# -- init ------------------------------------------------------------------------------------------
def test_init_home_writes_a_0600_key_and_a_template_that_loads(tmp_path: Path) -> None:
    home = tmp_path / "runner"
    path = init_home(home, "http://127.0.0.1:4000")
    assert path == home / CONFIG_FILE
    key_path = home / DEFAULT_KEY_FILE
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    key = load_key(key_path)
    s = load_settings(home)
    assert s.validator_rpc == "http://127.0.0.1:4000"
    assert s.quic_endpoint == ("127.0.0.1", 4433)
    assert s.key_file == key_path and s.journal_path == home / "data" / "journal.sqlite3"
    assert s.capabilities.job_kinds == (JOB_KIND_HTTP,)
    assert s.rate_card.rate_for(JOB_KIND_HTTP) == Rate(1000, 0)
    assert s.chain_id is None and s.metrics_addr == ("127.0.0.1", 9465)
    # The node's own key reader accepts the runner key (same file format, same address).
    assert load_account_private_key(key_path) == (key.private_key, key.address)


def test_init_home_refuses_to_overwrite_and_force_keeps_the_key(tmp_path: Path) -> None:
    home = tmp_path / "runner"
    init_home(home, "http://127.0.0.1:4000")
    key_before = (home / DEFAULT_KEY_FILE).read_bytes()
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        init_home(home, "http://127.0.0.1:4000")
    (home / CONFIG_FILE).write_text("garbage")
    init_home(home, "http://10.1.2.3:4000", force=True)
    assert (home / DEFAULT_KEY_FILE).read_bytes() == key_before
    assert load_settings(home).validator_rpc == "http://10.1.2.3:4000"


def test_init_home_refuses_a_bad_rpc_url_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        init_home(tmp_path / "h", "ftp://x")
    assert not (tmp_path / "h").exists()


def test_template_is_commented_line_by_line() -> None:
    lines = render_template("http://127.0.0.1:4000").splitlines()
    for i, line in enumerate(lines):
        if not line or line.startswith(("#", "[")):
            continue
        # Every setting has an explanation above it (keys that share one are grouped right under it).
        j = i - 1
        while lines[j] and not lines[j].startswith(("#", "[")):
            j -= 1
        assert lines[j].startswith("#"), f"line {i + 1} {line!r} has no comment above it"


def test_template_ipv6_rpc_host_gets_brackets_in_the_quic_hint() -> None:
    text = render_template("http://[::1]:4000")
    assert '# quic_endpoint = "[::1]:4433"' in text
    assert parse_settings(text, Path("/h")).quic_endpoint == ("::1", 4433)


# -- values -----------------------------------------------------------------------------------------
def test_minimal_file_gets_documented_defaults() -> None:
    s = _parse()
    assert s.validator_rpc == "http://10.0.0.5:4000"  # type: ignore[attr-defined]
    assert s.quic_endpoint == ("10.0.0.5", 4433)  # type: ignore[attr-defined]
    assert s.key_file == Path("/home/r/keys/runner.key")  # type: ignore[attr-defined]
    assert s.heartbeat.onchain_cadence_blocks == 0 and s.heartbeat.safety_margin_blocks == 20  # type: ignore[attr-defined]
    # unset: the chain's governed HEARTBEAT_BLOCKS / RESULT_TX_* (GET /params), read by the daemon every block
    assert (s.results.inclusion_grace_blocks, s.results.rebroadcast_interval_blocks) == (None, None)  # type: ignore[attr-defined]
    assert s.heartbeat.quic_interval_blocks is None  # type: ignore[attr-defined]
    assert s.rate_card.rate_for(JOB_KIND_HTTP) == Rate(5, 1)  # type: ignore[attr-defined]


def test_executor_sections_are_parsed() -> None:
    s = _parse(f"""
[executors.http]
max_response_bytes = 1000
request_timeout_s = 5

[executors.llm]
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "OPENAI_API_KEY"
[executors.llm.models]
"0x{HASH}" = "gpt-x"

[executors.mcp.servers]
weather = "http://127.0.0.1:8001/mcp"

[executors.custom]
time_limit_s = 3
"0x{HASH}" = ["/bin/echo", "hi"]
{"cd" * 32} = ["/bin/cat"]
""")
    ex = s.executors  # type: ignore[attr-defined]
    assert ex.http.max_response_bytes == 1000 and ex.http.request_timeout_s == 5.0
    assert ex.llm.models == {bytes.fromhex(HASH): "gpt-x"} and ex.llm.api_key_env == "OPENAI_API_KEY"
    assert {k: v.url for k, v in ex.mcp.servers.items()} == {"weather": "http://127.0.0.1:8001/mcp"}
    assert ex.custom.commands == {bytes.fromhex(HASH): ("/bin/echo", "hi"), bytes.fromhex("cd" * 32): ("/bin/cat",)}
    assert ex.custom.time_limit_s == 3.0 and ex.custom.memory_limit_mb == 512


@pytest.mark.parametrize(("extra", "message"), [
    ("[runner2]\n", "runner.toml: runner2: unknown section"),
    ("[heartbeat]\ncadence = 5\n", "runner.toml: heartbeat.cadence: unknown key"),
    ("[executors.custom]\n\"0x" + HASH + "\" = \"/bin/echo\"\n",
     f"runner.toml: executors.custom.0x{HASH}: expected a non-empty array"),
    ("[executors.custom]\n\"0xabc\" = [\"/bin/echo\"]\n", "runner.toml: executors.custom.0xabc: expected a 32-byte"),
    ("[executors.custom]\ntime_limit = 5\n", "runner.toml: executors.custom.time_limit: unknown key"),
    ("[executors.custom]\ntime_limit_s = -1\n", "runner.toml: executors.custom.time_limit_s: expected a positive"),
    (f"[executors.custom]\n\"0x{HASH}\" = [\"/a\"]\n\"{HASH.upper()}\" = [\"/b\"]\n",
     "runner.toml: executors.custom.ABAB"),
    (f"[executors.llm.models]\n\"0x{HASH}\" = \"m\"\n", "runner.toml: executors.llm.base_url: required"),
    ("[executors.llm]\ndefault_temperature = 3\n", "runner.toml: executors.llm.default_temperature"),
    ("[executors.mcp.servers]\nw = \"nope\"\n", "runner.toml: executors.mcp.servers.w: expected an http"),
    ("[metrics]\naddr = \"nohost\"\n", "runner.toml: metrics.addr: expected HOST:PORT"),
    ("[log]\nlevel = \"loud\"\n", "runner.toml: log.level: expected one of"),
    ("[fees]\nmax_fee_multiplier = 0\n", "runner.toml: fees.max_fee_multiplier: expected an integer >= 1"),
    ("[heartbeat]\nonchain_cadence_blocks = true\n", "runner.toml: heartbeat.onchain_cadence_blocks"),
])
def test_errors_name_the_exact_key(extra: str, message: str) -> None:
    assert _error(MINIMAL + extra).startswith(message)


@pytest.mark.parametrize(("text", "message"), [
    ("[capabilities]\njob_types = [\"http\"]\nmax_concurrent_jobs = 1\n", "runner.toml: runner: required section"),
    (MINIMAL.replace('validator_rpc = "http://10.0.0.5:4000/"', 'validator_rpc = "10.0.0.5:4000"'),
     "runner.toml: runner.validator_rpc: expected an http"),
    (MINIMAL.replace('validator_rpc = "http://10.0.0.5:4000/"', 'quic_endpoint = "x:1"'),
     "runner.toml: runner.validator_rpc: required key"),
    (MINIMAL.replace('"http://10.0.0.5:4000/"', '"http://10.0.0.5:4000/"\nquic_endpoint = "::1:4433"'),
     "runner.toml: runner.quic_endpoint"),
    (MINIMAL.replace('job_types = ["http"]', 'job_types = ["htp"]'),
     "runner.toml: capabilities.job_types[0]: unknown job type 'htp'"),
    (MINIMAL.replace("max_concurrent_jobs = 2", "max_concurrent_jobs = 0"),
     "runner.toml: capabilities.max_concurrent_jobs: expected an integer"),
    (MINIMAL.replace("[capabilities]", "[capabilities]\nrate_card = 1"), "runner.toml: capabilities.rate_card"),
    (MINIMAL.replace('base_price = "5"', 'base_price = "-5"'), "runner.toml: rate_card.http.base_price"),
    (MINIMAL + "[rate_card.llm]\nbase_price = 1\nprice_per_unit = 1\n",
     "runner.toml: rate_card.llm: job type 'llm' is priced but not"),
    (MINIMAL.replace('job_types = ["http"]', 'job_types = ["http", "llm"]'),
     "runner.toml: rate_card.llm: job type 'llm' is served but has no price"),
    ("[runner\n", "runner.toml: not valid TOML"),
])
def test_structural_errors_name_the_key(text: str, message: str) -> None:
    assert _error(text).startswith(message)


def test_llm_rate_card_and_quic_override() -> None:
    s = _parse(base=MINIMAL.replace('job_types = ["http"]', 'job_types = ["llm", "http"]')
               .replace('"http://10.0.0.5:4000/"', '"http://10.0.0.5:4000/"\nquic_endpoint = "q.example:7000"\n'
                        'chain_id = "cowboy-devnet-1"')
               + "[rate_card.llm]\nbase_price = 1\nprice_per_unit = 2\n")
    assert s.capabilities.job_kinds == (JOB_KIND_LLM, JOB_KIND_HTTP)  # type: ignore[attr-defined]
    assert s.quic_endpoint == ("q.example", 7000) and s.chain_id == "cowboy-devnet-1"  # type: ignore[attr-defined]


def test_missing_file_says_to_run_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cowboy-runner init"):
        load_settings(tmp_path)


# -- key file --------------------------------------------------------------------------------------
def test_key_file_is_0600_and_reloads_to_the_same_identity(tmp_path: Path) -> None:
    key = create_key(tmp_path / "keys" / "runner.key")
    assert stat.S_IMODE(os.stat(tmp_path / "keys" / "runner.key").st_mode) == 0o600
    again = load_key(tmp_path / "keys" / "runner.key")
    assert again == key and len(key.public_key) == 33
    assert "redacted" in repr(key) and key.private_key.hex() not in repr(key)
    with pytest.raises(FileExistsError):
        create_key(tmp_path / "keys" / "runner.key")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o601])
def test_key_file_readable_by_group_or_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "runner.key"
    write_account_key(path, bytes.fromhex("11" * 32))
    os.chmod(path, mode)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_key(path)


def test_key_file_problems_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="does not exist"):
        load_key(tmp_path / "nope.key")
    bad = tmp_path / "bad.key"
    bad.write_text("{}")
    os.chmod(bad, 0o600)
    with pytest.raises(KeyFileError, match=r"bad\.key"):
        load_key(bad)


def test_runner_key_address_matches_the_private_key() -> None:
    k = RunnerKey.from_private_key(bytes.fromhex("11" * 32))
    assert k.address.hex() == "19e7e376e7c213b7e7e7e46cc70a5dd086daff2a"
    with pytest.raises(ValueError):
        RunnerKey(k.private_key, bytes(20))


def test_allow_private_addresses_is_a_boolean_key_of_executors_http(tmp_path: Path) -> None:
    from cowboy_runner.config import init_home, load_settings, parse_settings

    toml = init_home(tmp_path / "home", "http://127.0.0.1:8545")
    assert load_settings(tmp_path / "home").executors.http.allow_private_addresses is False  # template default
    text = toml.read_text().replace("allow_private_addresses = false", "allow_private_addresses = true")
    assert parse_settings(text, tmp_path / "home").executors.http.allow_private_addresses is True
    bad = toml.read_text().replace("allow_private_addresses = false", 'allow_private_addresses = "yes"')
    with pytest.raises(ConfigError, match=r"executors\.http\.allow_private_addresses"):
        parse_settings(bad, tmp_path / "home")
