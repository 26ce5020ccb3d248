"""``cowboy-node testnet``: the homes of a static multi-validator network, generated in one place.

One threshold key is dealt to ``n`` validators (threshold ``n − ⌊(n − 1)/3⌋``) and the genesis beacon is signed
with the group secret; then ``OUTPUT/validator-<i>/`` is written for each validator exactly as ``cowboy-node init``
writes a home (config.toml, genesis.json, keys/validator.key, keys/fee_recipient.key, data/; directories 0700,
files 0600), with distinct ports and ``[p2p] peers`` listing the other validators, plus ``OUTPUT/faucet.key`` (an
account funded in genesis and allowed to send system instructions) and ``OUTPUT/testnet.json`` (a summary).

Validator ``i`` listens on ``BASE + 10·i`` (RPC, TCP), ``+1`` (runner QUIC, UDP), ``+2`` (validator peer layer,
UDP) and ``+3`` (metrics, TCP). With base port 0 free ports are picked by binding.

Whoever runs this learns every key share (a trusted dealer, not a distributed key generation): the homes must
reach their operators over a secure channel.
"""

from __future__ import annotations

import errno
import hashlib
import ipaddress
import json
import random
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.genesis import Genesis
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, create_empty_journal
from cowboy_node.crypto import threshold
from cowboy_node.node.config import PeerAddress, join_host_port, render_config, split_host_port
from cowboy_node.node.devgenesis import MAX_VALIDATORS, create_genesis, entropy_bytes
from cowboy_node.node.homefiles import private_dir, write_private
from cowboy_node.node.keys import write_validator_key
from cowboy_node.rpc.ui_routes import MAX_PEERS
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.crypto.secp256k1 import generate_private_key, private_key_to_address
from cowboy_protocol.keys import write_account_key
from cowboy_protocol.types.params import Cip11Flags

DEFAULT_BASE_PORT = 26600
"""First port of validator 0 (its RPC port)."""
PORT_STRIDE = 10
"""Ports reserved per validator: validator i's ports start at ``base + PORT_STRIDE·i``."""
RPC_OFFSET, QUIC_OFFSET, P2P_OFFSET, METRICS_OFFSET = 0, 1, 2, 3
"""Offsets of each listener from the validator's first port."""
FAUCET_BALANCE = 10**27
"""Genesis balance of the faucet account (1e9 CBY in wei, as ``init``'s)."""
SUMMARY_FILE = "testnet.json"
"""Summary written beside the homes (and printed by the command)."""
FAUCET_FILE = "faucet.key"
"""Faucet account key, beside the homes."""


class TestnetError(ValueError):
    """Arguments ``create_testnet`` cannot honour, or an output directory that already holds a network."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True, slots=True)
class ValidatorHome:
    """One generated validator home."""

    name: str
    """``validator-<i>``, as in genesis ``validators[i].name``."""
    home: Path
    """``OUTPUT/validator-<i>``."""
    rpc_addr: str
    """``[rpc] addr`` (HTTP API, TCP)."""
    quic_addr: str
    """``[quic] addr`` (CIP-11 runner transport, UDP)."""
    p2p_addr: str
    """``[p2p] addr`` (validator peer layer, UDP)."""
    metrics_addr: str
    """``[metrics] addr`` (Prometheus, TCP)."""
    ed25519_public_key: bytes
    """Peer identity (genesis ``validators[i].ed25519_public_key``)."""
    fee_recipient: bytes
    """Address of ``keys/fee_recipient.key``."""

    @property
    def rpc_url(self) -> str:
        """URL of the HTTP API (a wildcard listen host shown as loopback)."""
        host, port = split_host_port(self.rpc_addr, path="testnet", key="rpc.addr")
        return "http://" + join_host_port(_dialable(host), port)


@dataclass(frozen=True, slots=True)
class TestnetLayout:
    """What :func:`create_testnet` wrote."""

    __test__ = False  # not a pytest test class

    output: Path
    """The output directory."""
    chain_id: str
    """Chain identifier."""
    genesis: Genesis
    """The genesis every home holds (``genesis.raw`` is each home's genesis.json, byte for byte)."""
    validators: tuple[ValidatorHome, ...]
    """The homes, validator i at position i."""
    faucet_address: bytes
    """Address of ``OUTPUT/faucet.key``."""
    faucet_key: Path
    """``OUTPUT/faucet.key``."""

    def summary(self) -> dict[str, Any]:
        """The ``testnet.json`` document."""
        return {
            "chain_id": self.chain_id,
            "genesis_hash": "0x" + self.genesis.hash().hex(),
            "threshold": self.genesis.threshold,
            "validators": [{
                "name": v.name, "home": str(v.home), "rpc": v.rpc_url, "p2p_addr": v.p2p_addr,
                "quic_addr": v.quic_addr, "metrics_addr": v.metrics_addr,
                "ed25519_public_key": "0x" + v.ed25519_public_key.hex(),
            } for v in self.validators],
            "faucet": {"address": to_checksum_address(self.faucet_address), "key": str(self.faucet_key)},
        }


def create_testnet(output: Path, n: int, *, chain_id: str = "cowboy-testnet-1", block_time_ms: int | None = None,
                   base_port: int = DEFAULT_BASE_PORT, host: str | Sequence[str] = "127.0.0.1",
                   cip11_phase: int = 2, entropy: bytes | None = None,
                   genesis_time_ms: int | None = None) -> TestnetLayout:
    """Deal the key, build the genesis and write the ``n`` homes, the faucet key and ``testnet.json``.

    ``host`` is every validator's host, or one host per validator (validators on different machines); it is the
    address the others dial, so it must not be a wildcard. ``block_time_ms`` goes into genesis (default 1000) and,
    when given, into each config.toml as ``init`` does. ``entropy`` (≥ 32 bytes) derives every key
    deterministically (tests only); None draws them from os.urandom. Raises :class:`TestnetError`.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_VALIDATORS:
        raise TestnetError(f"--validators must be in 1..{MAX_VALIDATORS}, got {n}")
    hosts = _hosts(host, n)
    last = base_port + PORT_STRIDE * (n - 1) + METRICS_OFFSET
    if base_port != 0 and not (base_port > 0 and last <= 65535):
        raise TestnetError(f"--base-port must be 0 (pick free ports) or leave room for {n} validators "
                           f"(1..{65535 - PORT_STRIDE * (n - 1) - METRICS_OFFSET}), got {base_port}")
    if entropy is not None and len(entropy) < 32:
        raise TestnetError("entropy must be at least 32 bytes")
    _refuse_existing(output, n)

    # Secrets, in memory first: nothing is written unless every step succeeded.
    account_keys = _account_keys(n + 1, entropy)
    faucet_sk, fee_sks = account_keys[0], account_keys[1:]
    faucet = private_key_to_address(faucet_sk)
    fee_recipients = [private_key_to_address(sk) for sk in fee_sks]
    net = create_genesis(
        chain_id=chain_id, n_validators=n, fee_recipients=fee_recipients, balances={faucet: FAUCET_BALANCE},
        system_deployers=(faucet,), genesis_time_ms=int(time.time() * 1000) if genesis_time_ms is None
        else genesis_time_ms, block_time_ms=block_time_ms or 1000, cip11=Cip11Flags.for_phase(cip11_phase),
        entropy=None if entropy is None else _expand(entropy, b"genesis", entropy_bytes(n)))
    genesis = net.genesis
    for i, key in enumerate(net.validator_keys):
        share = threshold.Share(key.bls_share_index, int.from_bytes(key.bls_secret, "big"))
        if not threshold.verify_share(genesis.commitment, share):
            raise AssertionError(f"validator-{i}'s share does not verify against the genesis commitment")

    ports = _ports(hosts, base_port)
    homes = tuple(ValidatorHome(
        name=v.name, home=output / v.name,
        rpc_addr=join_host_port(hosts[i], ports[i][RPC_OFFSET]),
        quic_addr=join_host_port(hosts[i], ports[i][QUIC_OFFSET]),
        p2p_addr=join_host_port(hosts[i], ports[i][P2P_OFFSET]),
        metrics_addr=join_host_port(hosts[i], ports[i][METRICS_OFFSET]),
        ed25519_public_key=v.ed25519_public_key, fee_recipient=fee_recipients[i],
    ) for i, v in enumerate(genesis.validators))

    private_dir(output)
    for i, h in enumerate(homes):
        private_dir(h.home)
        private_dir(h.home / "keys")
        private_dir(h.home / "data")
        create_empty_journal(h.home / "data" / VOTE_JOURNAL_FILE)  # new keys never signed: vote from view 1
        write_validator_key(h.home / "keys" / "validator.key", net.validator_keys[i])
        write_account_key(h.home / "keys" / "fee_recipient.key", fee_sks[i])
        write_private(h.home / "genesis.json", genesis.raw)
        peers = [PeerAddress(o.ed25519_public_key, hosts[j], ports[j][P2P_OFFSET])
                 for j, o in enumerate(homes) if j != i]
        # The network page of each validator shows the others and may read them (and they it): without CORS a
        # page's cross-origin /status of a sibling validator is refused by the browser (issue 37).
        others = [f"http://{o.rpc_addr}" for j, o in enumerate(homes) if j != i][:MAX_PEERS]
        write_private(h.home / "config.toml", render_config(
            chain_id=chain_id, rpc_addr=h.rpc_addr, quic_addr=h.quic_addr, metrics_addr=h.metrics_addr,
            block_time_ms=block_time_ms, p2p_addr=h.p2p_addr, p2p_peers=peers, ui_peers=others,
            ui_cors_origins=others).encode())
    write_account_key(output / FAUCET_FILE, faucet_sk)
    layout = TestnetLayout(output=output, chain_id=chain_id, genesis=genesis, validators=homes,
                           faucet_address=faucet, faucet_key=output / FAUCET_FILE)
    (output / SUMMARY_FILE).write_text(json.dumps(layout.summary(), indent=2) + "\n")
    return layout


def _hosts(host: str | Sequence[str], n: int) -> list[str]:
    """One host for every validator, or one per validator; each a dialable host name or address."""
    given = [host] if isinstance(host, str) else list(host)
    if len(given) == 1:
        given = given * n
    if len(given) != n:
        raise TestnetError(f"--host: give one host for all validators or one per validator ({n}), got {len(given)}")
    hosts = []
    for h in given:
        h = h.removeprefix("[").removesuffix("]")
        try:
            split_host_port(join_host_port(h, 1), path="command line", key="--host")
        except ConfigError as e:
            raise TestnetError(str(e)) from None
        if _dialable(h) != h:
            raise TestnetError(f"--host {h}: the other validators dial this address, so it cannot be a wildcard; "
                               "give the machine's address (and edit [p2p] addr to listen on all interfaces)")
        hosts.append(h)
    return hosts


def _dialable(host: str) -> str:
    """A wildcard listen host as the loopback address of its family; any other host unchanged."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if ip.is_unspecified:
        return "127.0.0.1" if ip.version == 4 else "::1"
    return host


def _refuse_existing(output: Path, n: int) -> None:
    """Refuse an output directory that already holds a network (or any file this would write)."""
    if (output / "validator-0").exists():
        raise TestnetError(f"{output / 'validator-0'} already exists; refusing to overwrite a generated testnet")
    for path in [output / f"validator-{i}" for i in range(n)] + [output / FAUCET_FILE, output / SUMMARY_FILE]:
        if path.exists() or path.is_symlink():
            raise TestnetError(f"{path} already exists; refusing to overwrite it")


def _expand(entropy: bytes, label: bytes, length: int) -> bytes:
    """``length`` bytes derived from ``entropy`` for ``label`` (SHAKE-256)."""
    return hashlib.shake_256(b"cowboy-testnet\x00" + label + b"\x00" + entropy).digest(length)


def _account_keys(count: int, entropy: bytes | None) -> list[bytes]:
    """``count`` secp256k1 private keys: fresh, or derived from ``entropy``."""
    if entropy is None:
        return [generate_private_key() for _ in range(count)]
    keys = []
    for i in range(count):
        counter = 0
        while True:  # a derived scalar outside [1, n) has probability ~2^-128; take the next one
            sk = _expand(entropy, b"account-%d-%d" % (i, counter), 32)
            try:
                private_key_to_address(sk)
            except ValueError:
                counter += 1
                continue
            keys.append(sk)
            break
    return keys


def _bind(family: socket.AddressFamily, kind: socket.SocketKind, host: str, port: int,
          held: list[socket.socket]) -> int | None:
    """Bind ``port`` (0: any) of ``kind`` on ``host`` and hold the socket with the others; the bound port, or None
    when it is in use."""
    s = socket.socket(family, kind)
    held.append(s)
    try:
        s.bind((host, port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            return None
        raise TestnetError(f"--base-port 0: cannot bind a free port on {host}: {e.strerror}") from None
    return int(s.getsockname()[1])


def _ports(hosts: Sequence[str], base_port: int) -> list[tuple[int, int, int, int]]:
    """Each validator's (rpc, quic, p2p, metrics) ports: from ``base_port``, or free ones when it is 0."""
    if base_port:
        firsts = [base_port + PORT_STRIDE * i for i in range(len(hosts))]
        return [(p + RPC_OFFSET, p + QUIC_OFFSET, p + P2P_OFFSET, p + METRICS_OFFSET) for p in firsts]
    kinds = {RPC_OFFSET: socket.SOCK_STREAM, QUIC_OFFSET: socket.SOCK_DGRAM, P2P_OFFSET: socket.SOCK_DGRAM,
             METRICS_OFFSET: socket.SOCK_STREAM}
    held: list[socket.socket] = []  # kept bound until every port is chosen, so none is handed out twice
    used: set[int] = set()
    candidates = _candidate_ports()
    try:
        result = []
        for h in hosts:
            family = socket.AF_INET6 if ":" in h else socket.AF_INET
            ports = []
            for off in range(4):
                for _ in range(1000):
                    port = _bind(family, kinds[off], h, next(candidates, 0), held)
                    if port is None:
                        continue
                    if off == P2P_OFFSET and _bind(family, socket.SOCK_STREAM, h, port, held) is None:
                        continue  # the peer port is free for both transports ([p2p] transport may be "tcp")
                    if port not in used:  # distinct numbers even across TCP and UDP
                        used.add(port)
                        ports.append(port)
                        break
                else:
                    raise TestnetError(f"--base-port 0: no distinct free port found on {h}")
            result.append((ports[0], ports[1], ports[2], ports[3]))
        return result
    finally:
        for s in held:
            s.close()


FREE_PORT_FLOOR = 20000
"""``--base-port 0`` picks ports from here up to the start of the kernel's ephemeral range: a port the kernel
hands to outgoing connections (another validator's, an RPC client's) can be taken between the choice and the
node's bind, which once stopped a validator with ``cannot listen``."""


def _candidate_ports() -> Iterator[int]:
    """Ports below the ephemeral range, from a random start (so concurrent invocations rarely meet), wrapping
    once; then none (the caller binds port 0) when that range is too small or unknown."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default start; elsewhere the range is different and only a guess
    span = low - FREE_PORT_FLOOR
    if span < 1000:
        return iter(())
    start = random.randrange(span)
    return (FREE_PORT_FLOOR + (start + i) % span for i in range(span))


