"""``cowboy-node testnet``: N homes from one dealing, one byte-identical genesis, distinct ports, peers wired."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cowboy_node.chain.genesis import load_genesis
from cowboy_node.consensus.beacon import verify_beacon
from cowboy_node.crypto import bls, threshold
from cowboy_node.node import testnet as testnet_module
from cowboy_node.node.config import PeerAddress, load_config, split_host_port
from cowboy_node.node.keys import load_validator_key
from cowboy_node.node.testnet import FREE_PORT_FLOOR, TestnetError, TestnetLayout, create_testnet
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.keys import load_account_key
from cowboy_protocol.types.params import Cip11Flags

COWBOY_NODE = Path(sys.executable).parent / "cowboy-node"


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> TestnetLayout:
    out = tmp_path_factory.mktemp("tn") / "net"
    return create_testnet(out, 4, chain_id="cowboy-testnet-7", base_port=31000, entropy=b"\x07" * 32,
                          genesis_time_ms=1_700_000_000_000)


def _port(addr: str) -> int:
    return split_host_port(addr, path="t", key="k")[1]


def test_four_homes_share_one_byte_identical_genesis(net: TestnetLayout) -> None:
    homes = sorted(p.name for p in net.output.iterdir() if p.is_dir())
    assert homes == [f"validator-{i}" for i in range(4)]
    raws = {(net.output / h / "genesis.json").read_bytes() for h in homes}
    assert raws == {net.genesis.raw}
    g = load_genesis(net.output / "validator-0" / "genesis.json")
    assert g.chain_id == "cowboy-testnet-7" and len(g.validators) == 4 and g.threshold == 3
    assert [v.name for v in g.validators] == homes
    assert verify_beacon(g.group_public_key, Round(0, 0), g.genesis_beacon)


def test_every_config_loads_with_distinct_ports_from_the_base(net: TestnetLayout) -> None:
    ports: list[int] = []
    for i in range(4):
        cfg = load_config(net.output / f"validator-{i}")
        assert cfg.chain_id == "cowboy-testnet-7" and cfg.block_time_ms is None
        got = [_port(a) for a in (cfg.rpc_addr, cfg.quic_addr, cfg.p2p_addr, cfg.metrics_addr)]
        assert got == [31000 + 10 * i + off for off in range(4)]
        ports += got
    assert len(set(ports)) == 16


def test_each_home_lists_the_other_validators_as_peers(net: TestnetLayout) -> None:
    g = net.genesis
    for i in range(4):
        cfg = load_config(net.output / f"validator-{i}")
        expected = tuple(PeerAddress(g.validators[j].ed25519_public_key, "127.0.0.1", 31000 + 10 * j + 2)
                         for j in range(4) if j != i)
        assert cfg.p2p_peers == expected
        own = load_validator_key(cfg.validator_key_path)
        assert ed25519.public_key_from_seed(own.ed25519_seed) == g.validators[i].ed25519_public_key
        assert g.validators[i].ed25519_public_key not in {p.public_key for p in cfg.p2p_peers}


def test_each_key_share_verifies_against_the_genesis_commitment(net: TestnetLayout) -> None:
    g = load_genesis(net.output / "validator-0" / "genesis.json")
    partials = []
    for i in range(4):
        key = load_validator_key(net.output / f"validator-{i}" / "keys" / "validator.key")
        share = threshold.Share(key.bls_share_index, int.from_bytes(key.bls_secret, "big"))
        assert share.index == i + 1
        assert threshold.verify_share(g.commitment, share)
        assert bls.public_key(share.secret) == g.validators[i].bls_public_key == g.share_public_keys()[i]
        partials.append((share.index, threshold.partial_sign(share, b"hello")))
    assert bls.verify(g.group_public_key, b"hello", threshold.recover(partials[:3], g.threshold))
    assert bls.verify(g.group_public_key, b"hello", threshold.recover(partials[1:], g.threshold))


def test_secrets_are_0600_in_0700_directories(net: TestnetLayout) -> None:
    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(net.output) == 0o700 and mode(net.faucet_key) == 0o600
    for i in range(4):
        home = net.output / f"validator-{i}"
        assert {mode(d) for d in (home, home / "keys", home / "data")} == {0o700}
        for f in ("keys/validator.key", "keys/fee_recipient.key", "genesis.json", "config.toml"):
            assert mode(home / f) == 0o600, f


def test_faucet_is_funded_and_a_system_deployer_and_fee_recipients_are_each_homes_key(net: TestnetLayout) -> None:
    g = net.genesis
    faucet = load_account_key(net.faucet_key)
    assert faucet == net.faucet_address and g.balances == {faucet: 10**27} and g.system_deployers == (faucet,)
    for i, v in enumerate(g.validators):
        assert load_account_key(net.output / f"validator-{i}" / "keys" / "fee_recipient.key") == v.fee_recipient


def test_summary_file_matches_the_layout(net: TestnetLayout) -> None:
    doc = json.loads((net.output / "testnet.json").read_text())
    assert doc == net.summary()
    assert doc["chain_id"] == "cowboy-testnet-7" and doc["faucet"]["key"] == str(net.faucet_key)
    assert [v["rpc"] for v in doc["validators"]] == [f"http://127.0.0.1:{31000 + 10 * i}" for i in range(4)]
    assert [v["p2p_addr"] for v in doc["validators"]] == [f"127.0.0.1:{31002 + 10 * i}" for i in range(4)]
    assert [v["ed25519_public_key"] for v in doc["validators"]] == [
        "0x" + v.ed25519_public_key.hex() for v in net.genesis.validators]


def test_refuses_an_output_that_already_holds_a_network(net: TestnetLayout) -> None:
    before = (net.output / "validator-0" / "genesis.json").read_bytes()
    with pytest.raises(TestnetError, match="validator-0 already exists"):
        create_testnet(net.output, 4, base_port=31000)
    assert (net.output / "validator-0" / "genesis.json").read_bytes() == before


def test_same_entropy_same_network_other_entropy_other_keys(tmp_path: Path) -> None:
    a = create_testnet(tmp_path / "a", 2, entropy=b"x" * 32, genesis_time_ms=5)
    b = create_testnet(tmp_path / "b", 2, entropy=b"x" * 32, genesis_time_ms=5)
    c = create_testnet(tmp_path / "c", 2, entropy=b"y" * 32, genesis_time_ms=5)
    assert a.genesis.raw == b.genesis.raw != c.genesis.raw
    assert a.genesis.threshold == 2


def test_one_validator_network_is_an_init_like_home(tmp_path: Path) -> None:
    net = create_testnet(tmp_path / "one", 1, base_port=32000)
    cfg = load_config(tmp_path / "one" / "validator-0")
    assert cfg.p2p_peers == () and net.genesis.threshold == 1 and len(net.genesis.commitment) == 1


def test_free_ports_with_base_port_zero_are_distinct(tmp_path: Path) -> None:
    net = create_testnet(tmp_path / "free", 3, base_port=0)
    ports = [_port(a) for v in net.validators for a in (v.rpc_addr, v.quic_addr, v.p2p_addr, v.metrics_addr)]
    assert len(set(ports)) == 12 and 0 not in ports
    cfg = load_config(tmp_path / "free" / "validator-0")
    assert [p.port for p in cfg.p2p_peers] == [_port(net.validators[j].p2p_addr) for j in (1, 2)]


def test_free_ports_stay_below_the_ephemeral_range_and_skip_ports_in_use(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    # The first 8 candidates are in use (held below): they are skipped, not an error.
    busy = []
    for port in range(FREE_PORT_FLOOR, FREE_PORT_FLOOR + 8):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_INET, kind)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            busy.append(s)
    monkeypatch.setattr(testnet_module.random, "randrange", lambda span: 0)
    try:
        net = create_testnet(tmp_path / "low", 3, base_port=0)
    finally:
        for s in busy:
            s.close()
    ports = [_port(a) for v in net.validators for a in (v.rpc_addr, v.quic_addr, v.p2p_addr, v.metrics_addr)]
    assert len(set(ports)) == 12
    assert all(FREE_PORT_FLOOR + 8 <= p < low for p in ports), ports


def test_a_free_peer_port_is_free_for_tcp_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``[p2p] transport = "tcp"`` listens on the same port number over TCP: a port whose UDP side is free but
    whose TCP side is taken is not handed out as a peer port."""
    # Candidates from the floor: validator 0's RPC (TCP), QUIC (UDP), then its peer port would be floor + 2.
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", FREE_PORT_FLOOR + 2))
    taken.listen()
    monkeypatch.setattr(testnet_module.random, "randrange", lambda span: 0)
    try:
        net = create_testnet(tmp_path / "tcp", 2, base_port=0)
    finally:
        taken.close()
    p2p_ports = [_port(v.p2p_addr) for v in net.validators]
    assert FREE_PORT_FLOOR + 2 not in p2p_ports, p2p_ports


def test_one_host_per_validator_and_ipv6(tmp_path: Path) -> None:
    net = create_testnet(tmp_path / "h", 2, host=["10.0.0.1", "::1"], base_port=33000)
    assert [v.p2p_addr for v in net.validators] == ["10.0.0.1:33002", "[::1]:33012"]
    assert load_config(tmp_path / "h" / "validator-0").p2p_peers[0].host == "::1"
    assert load_config(tmp_path / "h" / "validator-1").p2p_peers[0] == PeerAddress(
        net.genesis.validators[0].ed25519_public_key, "10.0.0.1", 33002)


@pytest.mark.parametrize("kwargs,match", [
    ({"n": 0}, "1..64"), ({"n": 65}, "1..64"), ({"base_port": 65530}, "--base-port"),
    ({"host": ["127.0.0.1", "127.0.0.2"]}, "one per validator"), ({"host": "0.0.0.0"}, "wildcard"),
    ({"host": "a b"}, "--host"),
])
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path: Path, kwargs: dict[str, object],
                                                              match: str) -> None:
    args: dict[str, object] = {"n": 3, **kwargs}
    n = args.pop("n")
    with pytest.raises(TestnetError, match=match):
        create_testnet(tmp_path / "x", n, **args)  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


def test_console_command_generates_prints_the_summary_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    argv = [str(COWBOY_NODE), "testnet", "--validators", "4", "--output", str(out), "--chain-id", "cli-net",
            "--base-port", "34000", "--block-time-ms", "500", "--cip11-phase", "1"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary == json.loads((out / "testnet.json").read_text())
    assert summary["chain_id"] == "cli-net" and len(summary["validators"]) == 4
    g = load_genesis(out / "validator-3" / "genesis.json")
    assert g.block_time_ms == 500 and g.cip11 == Cip11Flags.for_phase(1)
    assert load_config(out / "validator-3").block_time_ms == 500
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 1 and "already exists" in again.stderr and again.stdout == ""
    bad = subprocess.run([*argv[:3], "65", *argv[4:]], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "1..64" in bad.stderr
