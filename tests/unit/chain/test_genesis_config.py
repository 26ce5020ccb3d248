"""genesis.json and config.toml: invalid input stops start-up with file, key and expectation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cowboy_node.chain.genesis import parse_genesis
from cowboy_node.node.config import ConfigError, load_config, render_config
from cowboy_node.node.devgenesis import DevGenesis
from cowboy_protocol.types.params import TimerConfig


def _doc(dev: DevGenesis) -> dict:  # type: ignore[type-arg]
    return json.loads(dev.genesis.raw)


def test_genesis_round_trips_and_carries_the_required_parameters(dev_genesis: DevGenesis) -> None:
    g = parse_genesis(dev_genesis.genesis.raw)
    doc = _doc(dev_genesis)
    assert g == dev_genesis.genesis
    assert doc["params"]["timer"] == {"max_ttl_blocks": 2_592_000, "max_cycles_per_fire": 550_000,
                                      "max_cells_per_fire": 550_000, "max_timers_per_actor": 1_024,
                                      "gc_cycles_per_block": 5_000_000}
    assert g.timer == TimerConfig()
    assert set(doc["params"]["cip11"]) == {"CIP11_TRANSPORT_ENABLED", "CIP11_PRESENCE_SHADOW_ENABLED",
                                           "CIP11_PRESENT_FIRST_ENABLED", "CIP11_POLL_DISABLED",
                                           "PRESENCE_HARD_EXCLUDE_ENABLED"}
    assert len(g.genesis_beacon) == 48 and len(g.validators[0].bls_public_key) == 96


@pytest.mark.parametrize("mutate,key,fragment", [
    (lambda d: d.pop("chain_id"), "chain_id", "missing"),
    (lambda d: d.update(extra=1), None, "unknown keys ['extra']"),
    (lambda d: d["validators"][0].update(ed25519_public_key="0x1234"), "validators[0].ed25519_public_key",
     "expected 32 bytes"),
    (lambda d: d["balances"].update({"0xnothex": "1"}), "balances.0xnothex", ""),
    (lambda d: d["balances"].update({"0x" + "11" * 20: "-5"}), "balances.0x" + "11" * 20, "decimal"),
    (lambda d: d.update(genesis_beacon="0x" + "00" * 47), "genesis_beacon", "expected 48 bytes"),
    (lambda d: d["params"]["basefee"].update(alpha=0), None, "alpha must be > 0"),
    (lambda d: d["params"]["timer"].update(bogus=1), None, "params.timer: unknown keys"),
    (lambda d: d["params"]["cip11"].update(CIP11_POLL_DISABLED="yes"), None, "expected true or false"),
    (lambda d: d["threshold"].update(threshold=2), "threshold.threshold", "must be ≤"),
])
def test_invalid_genesis_names_the_key(dev_genesis: DevGenesis, mutate, key, fragment) -> None:  # type: ignore[no-untyped-def]
    doc = _doc(dev_genesis)
    mutate(doc)
    with pytest.raises(ConfigError) as e:
        parse_genesis(json.dumps(doc).encode(), "/h/genesis.json")
    msg = str(e.value)
    assert msg.startswith("/h/genesis.json")
    if key:
        assert e.value.key == key
    assert fragment in msg


def test_genesis_beacon_must_verify(dev_genesis: DevGenesis) -> None:
    doc = _doc(dev_genesis)
    other = bytes.fromhex(doc["genesis_beacon"][2:])
    doc["genesis_beacon"] = "0x" + (bytes([other[0]]) + other[1:][::-1]).hex()
    with pytest.raises(ConfigError) as e:
        parse_genesis(json.dumps(doc).encode())
    assert e.value.key == "genesis_beacon"


def test_rendered_config_loads_with_defaults(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(render_config(chain_id="c", rpc_addr="127.0.0.1:1", quic_addr="[::1]:2",
                                                         metrics_addr="127.0.0.1:3", block_time_ms=None))
    cfg = load_config(tmp_path)
    assert (cfg.rpc_addr, cfg.quic_addr, cfg.metrics_addr, cfg.block_time_ms) == (
        "127.0.0.1:1", "[::1]:2", "127.0.0.1:3", None)
    assert cfg.mempool_max_txs == 10_000 and cfg.log_format == "console"


@pytest.mark.parametrize("text,key", [
    ("[rpc]\naddr = 5\n", "rpc.addr"),
    ("[rpc]\naddr = \"nope\"\n", "rpc.addr"),
    ("[log]\nformat = \"xml\"\n", "log.format"),
    ("[mempool]\nmax_txs = 0\n", "mempool.max_txs"),
    ("[mempool]\nmax_tx = 10\n", "mempool.max_tx"),
    ("[nodes]\n", "nodes"),
    ("[node]\nblock_time_ms = 10\n", "node.block_time_ms"),
])
def test_invalid_config_names_file_and_key(tmp_path: Path, text: str, key: str) -> None:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    assert e.value.key == key
    assert str(e.value).startswith(str(tmp_path / "config.toml"))


def test_missing_or_unparsable_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path)
    (tmp_path / "config.toml").write_text("[rpc\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path)
