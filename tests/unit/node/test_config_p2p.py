"""config.toml ``[p2p]`` and ``[consensus]``: defaults, strict peer entries naming ``p2p.peers[i]``, bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.node.config import (
    INT_BOUNDS,
    NodeConfig,
    PeerAddress,
    format_peer,
    load_config,
    parse_peer,
    render_config,
)

K1, K2 = "0x" + "11" * 32, "0x" + "ab" * 32


def _load(tmp_path: Path, text: str) -> NodeConfig:
    (tmp_path / "config.toml").write_text(text)
    return load_config(tmp_path)


def _refused(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, text)
    assert str(e.value).startswith(str(tmp_path / "config.toml"))
    return e.value


def test_defaults_when_the_sections_are_absent(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "")
    assert cfg.p2p_addr == "127.0.0.1:26602" and cfg.p2p_peers == ()
    assert cfg.p2p_max_message_bytes == 8_388_608 and cfg.p2p_tx_gossip_flush_ms == 50
    assert cfg.p2p_transport == "quic"
    assert cfg.consensus_delta_ms == 0 and cfg.consensus_election == "random"


def test_rendered_config_carries_p2p_and_consensus_and_loads(tmp_path: Path) -> None:
    peers = [PeerAddress(bytes.fromhex(K1[2:]), "10.0.0.2", 26612), PeerAddress(bytes.fromhex(K2[2:]), "::1", 7)]
    cfg = _load(tmp_path, render_config(chain_id="c", rpc_addr="127.0.0.1:1", quic_addr="127.0.0.1:2",
                                        metrics_addr="127.0.0.1:3", block_time_ms=None, p2p_addr="0.0.0.0:4",
                                        p2p_peers=peers))
    assert cfg.p2p_addr == "0.0.0.0:4" and cfg.p2p_peers == tuple(peers)
    assert (cfg.consensus_delta_ms, cfg.consensus_election, cfg.p2p_max_message_bytes) == (0, "random", 8_388_608)
    init_like = _load(tmp_path, render_config(chain_id="c", rpc_addr="127.0.0.1:1", quic_addr="127.0.0.1:2",
                                              metrics_addr="127.0.0.1:3", block_time_ms=None))
    assert init_like.p2p_peers == () and init_like.p2p_addr == "127.0.0.1:26602"


def test_peers_parse_keys_hosts_and_ports_ipv6_in_brackets(tmp_path: Path) -> None:
    upper_hex = "0x" + K2[2:].upper()
    cfg = _load(tmp_path, f'[p2p]\naddr = "[::]:9000"\n'
                          f'peers = ["{K1}@node-1.example:26612", "{upper_hex}@[::1]:26622"]\n')
    assert cfg.p2p_peers == (PeerAddress(bytes.fromhex(K1[2:]), "node-1.example", 26612),
                             PeerAddress(bytes.fromhex(K2[2:]), "::1", 26622))
    assert [format_peer(p) for p in cfg.p2p_peers] == [f"{K1}@node-1.example:26612", f"{K2}@[::1]:26622"]
    assert str(cfg.p2p_peers[1]) == f"{K2}@[::1]:26622"


@pytest.mark.parametrize("entry", [
    f'"{K1[2:]}@127.0.0.1:1"',                  # no 0x
    f'"{K1[:-2]}@127.0.0.1:1"',                 # 31 bytes
    f'"{K1}00@127.0.0.1:1"',                    # 33 bytes
    f'"0x{"zz" * 32}@127.0.0.1:1"',             # not hex
    f'"{K1}"',                                  # no address
    f'"{K1}127.0.0.1:1"',                       # no @
    f'"{K1}@127.0.0.1"',                        # no port
    f'"{K1}@127.0.0.1:70000"',                  # port out of range
    f'"{K1}@127.0.0.1:0"',                      # port 0 cannot be dialled
    f'"{K1}@::1:5"',                            # IPv6 without brackets
    f'"{K1}@[nope]:5"',                         # brackets around a non-IPv6 host
    f'"{K1}@:5"',                               # empty host
    f'"{K1}@a b:5"',                            # space in host
    "5",                                        # not a string
])
def test_each_malformed_peer_entry_names_its_index(tmp_path: Path, entry: str) -> None:
    e = _refused(tmp_path, f'[p2p]\npeers = ["{K2}@127.0.0.1:1", "{K2[:-1]}c@127.0.0.1:2", {entry}]\n')
    assert e.key == "p2p.peers[2]", str(e)


def test_duplicate_peer_key_or_address_is_refused(tmp_path: Path) -> None:
    e = _refused(tmp_path, f'[p2p]\npeers = ["{K1}@127.0.0.1:1", "{K2}@127.0.0.1:2", "{K1}@127.0.0.1:3"]\n')
    assert e.key == "p2p.peers[2]" and "duplicate public key" in str(e) and "p2p.peers[0]" in str(e)
    e = _refused(tmp_path, f'[p2p]\npeers = ["{K1}@127.0.0.1:1", "{K2}@127.0.0.1:1"]\n')
    assert e.key == "p2p.peers[1]" and "duplicate address" in str(e)


def test_peers_must_be_an_array(tmp_path: Path) -> None:
    assert _refused(tmp_path, f'[p2p]\npeers = "{K1}@127.0.0.1:1"\n').key == "p2p.peers"


def test_p2p_addr_is_checked(tmp_path: Path) -> None:
    assert _refused(tmp_path, '[p2p]\naddr = "localhost"\n').key == "p2p.addr"


@pytest.mark.parametrize("full,lo,hi", [("p2p.max_message_bytes", 65_536, 67_108_864),
                                        ("p2p.tx_gossip_flush_ms", 1, 1000),
                                        ("consensus.delta_ms", 0, 600_000)])
def test_integer_bounds(tmp_path: Path, full: str, lo: int, hi: int) -> None:
    assert INT_BOUNDS[full] == (lo, hi)
    section, key = full.split(".")
    attr = full.replace(".", "_")
    assert getattr(_load(tmp_path, f"[{section}]\n{key} = {lo}\n"), attr) == lo
    assert getattr(_load(tmp_path, f"[{section}]\n{key} = {hi}\n"), attr) == hi
    for bad in (lo - 1, hi + 1):
        e = _refused(tmp_path, f"[{section}]\n{key} = {bad}\n")
        assert e.key == full and f"{lo}..{hi}" in str(e)


@pytest.mark.parametrize("text,key", [
    ("[p2p]\nlisten = \"127.0.0.1:1\"\n", "p2p.listen"),
    ("[consensus]\ntimeout_ms = 5\n", "consensus.timeout_ms"),
    ("[consensus]\ndelta_ms = \"5\"\n", "consensus.delta_ms"),
    ("[p2p]\nmax_message_bytes = true\n", "p2p.max_message_bytes"),
    ("[p2p]\ntx_gossip_flush_ms = 0.05\n", "p2p.tx_gossip_flush_ms"),
    ("[p2p]\ntransport = 1\n", "p2p.transport"),
])
def test_unknown_or_mistyped_keys_are_refused(tmp_path: Path, text: str, key: str) -> None:
    assert _refused(tmp_path, text).key == key


@pytest.mark.parametrize("election", ["round_robin", "random"])
def test_election_values(tmp_path: Path, election: str) -> None:
    assert _load(tmp_path, f'[consensus]\nelection = "{election}"\n').consensus_election == election


@pytest.mark.parametrize("election", ["roundrobin", "RANDOM", ""])
def test_unknown_election_is_refused(tmp_path: Path, election: str) -> None:
    e = _refused(tmp_path, f'[consensus]\nelection = "{election}"\n')
    assert e.key == "consensus.election" and "round_robin" in str(e)


@pytest.mark.parametrize("transport", ["quic", "tcp"])
def test_transport_values(tmp_path: Path, transport: str) -> None:
    assert _load(tmp_path, f'[p2p]\ntransport = "{transport}"\n').p2p_transport == transport


@pytest.mark.parametrize("transport", ["udp", "TCP", ""])
def test_unknown_transport_is_refused(tmp_path: Path, transport: str) -> None:
    e = _refused(tmp_path, f'[p2p]\ntransport = "{transport}"\n')
    assert e.key == "p2p.transport" and "'quic', 'tcp'" in str(e)


def test_parse_peer_names_the_given_key() -> None:
    with pytest.raises(ConfigError) as e:
        parse_peer("nope", path="x.toml", key="p2p.peers[7]")
    assert e.value.key == "p2p.peers[7]"


def test_skip_timeout_views_default_and_bounds(tmp_path: Path) -> None:
    assert _load(tmp_path, "").consensus_skip_timeout_views == 10
    assert _load(tmp_path, "[consensus]\nskip_timeout_views = 0\n").consensus_skip_timeout_views == 0
    assert _refused(tmp_path, "[consensus]\nskip_timeout_views = -1\n").key == "consensus.skip_timeout_views"


def test_quic_advertise_defaults_to_a_dialable_listen_address(tmp_path: Path) -> None:
    from cowboy_node.node.config import advertised_quic

    assert advertised_quic(_load(tmp_path, '[quic]\naddr = "10.1.2.3:4433"\n')) == "10.1.2.3:4433"
    assert advertised_quic(_load(tmp_path, '[quic]\naddr = "0.0.0.0:4433"\n')) is None
    assert advertised_quic(_load(tmp_path, '[quic]\naddr = "[::]:4433"\n')) is None
    cfg = _load(tmp_path, '[quic]\naddr = "0.0.0.0:4433"\nadvertise = "v0.example.net:4433"\n')
    assert advertised_quic(cfg) == "v0.example.net:4433"
    for bad in ("0.0.0.0:4433", "v0.example.net:0", "v0.example.net"):
        assert _refused(tmp_path, f'[quic]\nadvertise = "{bad}"\n').key == "quic.advertise"


def test_rpc_advertise_defaults_to_the_listen_address_as_a_url(tmp_path: Path) -> None:
    from cowboy_node.node.config import advertised_rpc

    assert advertised_rpc(_load(tmp_path, '[rpc]\naddr = "10.1.2.3:4000"\n')) == "http://10.1.2.3:4000"
    assert advertised_rpc(_load(tmp_path, '[rpc]\naddr = "[::1]:4000"\n')) == "http://[::1]:4000"
    assert advertised_rpc(_load(tmp_path, '[rpc]\naddr = "0.0.0.0:4000"\n')) is None
    cfg = _load(tmp_path, '[rpc]\naddr = "0.0.0.0:4000"\nadvertise = "https://v0.example.net"\n')
    assert advertised_rpc(cfg) == "https://v0.example.net"
    for bad in ("v0.example.net:4000", "ftp://v0", "http://v0/path"):
        assert _refused(tmp_path, f'[rpc]\nadvertise = "{bad}"\n').key == "rpc.advertise"
