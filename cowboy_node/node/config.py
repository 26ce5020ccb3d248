"""``config.toml``: the node's local (non-consensus) settings.

Every invalid value stops start-up with a :class:`ConfigError` naming the
file, the key and what was expected. Unknown keys are errors too (a typo
must not silently fall back to a default).
"""

from __future__ import annotations

import ipaddress
import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.pruning import MIN_RETAIN_BLOCKS
from cowboy_node.p2p.endpoint_gossip import is_http_url as _is_http_url
from cowboy_node.p2p.peer_link import TRANSPORTS
from cowboy_node.rpc.ui_routes import MAX_PEERS, parse_origin
from cowboy_protocol.netaddr import parse_host_port

_SCHEMA: dict[str, dict[str, type]] = {
    "node": {"chain_id": str, "block_time_ms": int, "data_dir": str, "halt_height": int},
    "storage": {"retain_blocks": int, "prune_batch_blocks": int},
    "snapshot": {"interval_blocks": int, "keep": int, "state_sync": bool, "auto_state_sync": bool,
                 "fallback_behind_blocks": int},
    "rpc": {"addr": str, "advertise": str, "max_body_bytes": int, "max_submit_batch": int,
            "max_connections": int, "max_connections_per_ip": int, "header_timeout_ms": int, "idle_timeout_ms": int,
            "fd_reserve": int, "read_max_concurrent": int, "read_max_queue": int, "read_call_timeout_ms": int,
            "read_budget_ms_per_s": int, "read_per_client_rps": int, "read_max_wait_ms": int,
            "subscription_max": int, "subscription_buffer_bytes": int, "subscription_send_timeout_ms": int,
            "subscription_max_lag_blocks": int, "subscription_replay_per_s": int},
    "quic": {"addr": str, "advertise": str, "workers": int},
    "metrics": {"addr": str, "enabled": bool},
    "log": {"format": str, "level": str},
    "mempool": {"max_txs": int, "max_bytes": int, "max_txs_per_sender": int, "max_nonce_gap": int,
                "replacement_bump_percent": int, "max_queued": int, "max_queued_per_sender": int,
                "queued_lifetime_s": int, "journal": bool, "admission_workers": int},
    "p2p": {"addr": str, "peers": list, "max_message_bytes": int, "tx_gossip_flush_ms": int, "transport": str},
    "consensus": {"delta_ms": int, "election": str, "skip_timeout_views": int, "double_sign_check_views": int,
                  "sync_verify_workers": int},
    "ui": {"peers": list, "cors_origins": list},
}
"""Type of every key by section; a ``list`` value is checked element by element by its own parser."""
_MIB = 1024 * 1024
INT_BOUNDS: dict[str, tuple[int, int]] = {
    "node.block_time_ms": (50, 600_000),
    "node.halt_height": (1, 2**31 - 1),  # absent: never halt
    "storage.retain_blocks": (0, 2**31 - 1),  # 0: archive; else at least MIN_RETAIN_BLOCKS (checked after)
    "storage.prune_batch_blocks": (1, 10_000),
    "snapshot.interval_blocks": (0, 2**31 - 1),  # 0: no periodic snapshots
    "snapshot.keep": (1, 1000),
    "snapshot.fallback_behind_blocks": (0, 2**31 - 1),  # 0: fall back only when peers have pruned what we need
    "quic.workers": (1, 64),
    "rpc.max_body_bytes": (1, 64 * _MIB),
    "rpc.max_submit_batch": (1, 100_000),
    "rpc.max_connections": (1, 1_048_576),
    "rpc.max_connections_per_ip": (1, 1_048_576),
    "rpc.header_timeout_ms": (100, 600_000),
    "rpc.idle_timeout_ms": (100, 3_600_000),
    "rpc.fd_reserve": (64, 1_048_576),
    "rpc.read_max_concurrent": (1, 64),
    "rpc.read_max_queue": (1, 10_000),
    "rpc.read_max_wait_ms": (1, 600_000),
    "rpc.read_call_timeout_ms": (1, 60_000),
    "rpc.read_budget_ms_per_s": (1, 64_000),
    "rpc.read_per_client_rps": (1, 100_000),
    "rpc.subscription_max": (0, 1_048_576),  # 0: GET /subscribe refuses every subscription
    "rpc.subscription_buffer_bytes": (4096, 64 * _MIB),
    "rpc.subscription_send_timeout_ms": (10, 600_000),
    "rpc.subscription_max_lag_blocks": (1, 1_000_000),
    "rpc.subscription_replay_per_s": (1, 10_000_000),
    "mempool.max_txs": (1, 1_000_000),
    "mempool.max_bytes": (1, 1024 * _MIB),
    "mempool.max_txs_per_sender": (1, 10_000),
    "mempool.max_nonce_gap": (1, 10_000),
    "mempool.replacement_bump_percent": (1, 1000),
    "mempool.max_queued": (1, 1_000_000),  # above mempool.max_txs it binds no more than max_txs
    "mempool.max_queued_per_sender": (1, 10_000),  # above mempool.max_txs_per_sender it binds no more than that
    "mempool.queued_lifetime_s": (1, 86_400),
    "mempool.admission_workers": (0, 64),  # 0: signatures recovered in the validator process
    "p2p.max_message_bytes": (64 * 1024, 64 * _MIB),
    "p2p.tx_gossip_flush_ms": (1, 1000),
    "consensus.delta_ms": (0, 600_000),  # 0: automatic
    "consensus.skip_timeout_views": (0, 100_000),  # 0: never skip a silent leader
    "consensus.double_sign_check_views": (0, 100_000),  # 0: a validator without its journal votes at once
    "consensus.sync_verify_workers": (0, 16),  # 0: sync answers are verified in a thread of the node
}
"""Allowed range (inclusive) of every integer key, by ``"section.key"``; a value outside it stops start-up with a
ConfigError naming the key and the range. Every integer key in ``_SCHEMA`` needs an entry here (a test checks)."""
DEFAULT_INT_BOUNDS = (1, 2**31 - 1)
"""Range of an integer key missing from INT_BOUNDS (a safety net; add the key to INT_BOUNDS instead)."""
LOG_FORMATS = ("console", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
ELECTIONS = ("random", "round_robin")
"""Values of ``consensus.election``: leader chosen from the beacon, or in turn by view."""
DEFAULT_P2P_ADDR = "127.0.0.1:26602"
"""Default listen address of the validator peer layer (UDP for QUIC, TCP for ``transport = "tcp"``)."""


@dataclass(frozen=True, slots=True)
class PeerAddress:
    """Another validator of a static set, as listed in ``[p2p] peers`` (``0x<ed25519 key>@HOST:PORT``)."""

    public_key: bytes
    """The peer's Ed25519 public key (32 bytes; its identity in genesis ``validators[i].ed25519_public_key``)."""
    host: str
    """Host name or IP address to dial (an IPv6 address without brackets)."""
    port: int
    """Port (UDP, or TCP with ``transport = "tcp"``) of the peer's ``[p2p] addr``."""

    def __str__(self) -> str:
        return format_peer(self)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Parsed ``config.toml``."""

    home: Path
    """Node home directory (holds config.toml, genesis.json, keys/, data/)."""
    chain_id: str | None = None
    """Informational; genesis.json is authoritative (a mismatch is an error)."""
    block_time_ms: int | None = None
    """Local override of the block interval (default: genesis params.block_time_ms)."""
    data_dir: str = "data"
    """LevelDB directory, relative to home."""
    halt_height: int | None = None
    """``[node] halt_height`` (or ``run --halt-height``): commit this height, then exit 0 (None: run on)."""
    storage_retain_blocks: int = 0
    """``[storage] retain_blocks``: keep the blocks, receipts and indexes of the newest this many heights (0: all,
    an archive node)."""
    storage_prune_batch_blocks: int = 64
    """``[storage] prune_batch_blocks``: heights one prune step (one per committed block) deletes at most."""
    snapshot_interval_blocks: int = 0
    """``[snapshot] interval_blocks``: take a state snapshot into ``HOME/snapshots`` every this many blocks
    (0: never)."""
    snapshot_keep: int = 2
    """``[snapshot] keep``: snapshots kept; older ones are deleted."""
    snapshot_state_sync: bool = False
    """``[snapshot] state_sync``: a validator (of several) starting with an empty data directory first fetches the
    peers' newest snapshot and installs it, then block-syncs from its height."""
    snapshot_auto_state_sync: bool = True
    """``[snapshot] auto_state_sync``: a running validator that block sync cannot catch up (its peers pruned the
    blocks it needs, or one is ``fallback_behind_blocks`` ahead) restarts into a state sync by itself
    (``node/statesync_fallback.py``)."""
    snapshot_fallback_behind_blocks: int = 10_000
    """``[snapshot] fallback_behind_blocks``: how far a peer must be ahead for that fall-back (0: only pruned peers
    trigger it)."""
    rpc_addr: str = "127.0.0.1:4000"
    """HTTP API listen address."""
    rpc_advertise: str | None = None
    """``http(s)://HOST:PORT`` of this HTTP API as others reach it, announced to the other validators so runners
    can fail over to it (default: ``http://`` + ``rpc.addr`` unless it is a wildcard address)."""
    rpc_max_body_bytes: int = 1_048_576
    """Largest accepted request body."""
    rpc_max_submit_batch: int = 1000
    """Most transactions one ``POST /submit/batch`` may carry (more: 413 ``batch_too_large``, nothing admitted)."""
    rpc_max_connections: int = 1024
    """Most open HTTP API connections in all (lowered at start-up to soft RLIMIT_NOFILE − rpc_fd_reserve)."""
    rpc_max_connections_per_ip: int = 64
    """Most open HTTP API connections from one source address."""
    rpc_header_timeout_ms: int = 10_000
    """Time a connection has to deliver a request's complete headers (first request: from accept)."""
    rpc_idle_timeout_ms: int = 30_000
    """Time a keep-alive HTTP API connection may wait for its next request."""
    rpc_fd_reserve: int = 256
    """File descriptors the HTTP API never takes (LevelDB, QUIC, metrics, peers)."""
    rpc_read_max_concurrent: int = 1
    """Read-only calls (``POST /actor/read``) running at once, each in its own worker thread."""
    rpc_read_max_queue: int = 32
    """Read-only calls waiting for a worker; beyond it 503 ``busy``."""
    rpc_read_max_wait_ms: int = 5000
    """Longest a read-only call waits for a worker; then 503 ``busy`` (it never ran)."""
    rpc_read_call_timeout_ms: int = 1000
    """Wall-clock limit of one read-only call; then it stops with error ``read_timeout``."""
    rpc_read_budget_ms_per_s: int = 250
    """Execution milliseconds all read-only calls may use per second (250: a quarter of a core); when spent,
    503 ``busy`` with Retry-After."""
    rpc_read_per_client_rps: int = 10
    """Read-only calls per second one client address may start (burst twice that); beyond it 429 ``rate_limited``."""
    rpc_subscription_max: int = 1000
    """Open ``GET /subscribe`` WebSockets at most; beyond it 503 ``too_many_subscriptions``."""
    rpc_subscription_buffer_bytes: int = 256 * 1024
    """Per-subscription socket write buffer (high-water mark, bytes)."""
    rpc_subscription_send_timeout_ms: int = 5000
    """A subscriber whose buffer stays full this long is a slow consumer: told and dropped."""
    rpc_subscription_max_lag_blocks: int = 1000
    """Deepest resumption (``from`` below the head) and largest lag before a subscriber is dropped."""
    rpc_subscription_replay_per_s: int = 2000
    """Heights all subscriptions together may catch up per second (the newest height is never held back)."""
    quic_addr: str = "127.0.0.1:4433"
    quic_advertise: str | None = None
    """``HOST:PORT`` runners dial for this validator's QUIC transport, announced to the other validators and
    listed by ``GET /validators`` (default: ``quic.addr`` unless it is a wildcard address)."""
    """CIP-11 QUIC listen address (UDP)."""
    quic_workers: int = 1
    """QUIC worker processes (``[quic] workers``; docs/transport.md "QUIC worker processes"): 1 terminates QUIC in
    the validator process; N > 1 in N processes sharing ``quic.addr`` (about one core each)."""
    metrics_addr: str = "127.0.0.1:9464"
    """Prometheus listen address."""
    metrics_enabled: bool = True
    """Serve /metrics."""
    log_format: str = "console"
    """console or json."""
    log_level: str = "info"
    """debug, info, warning or error."""
    mempool_max_txs: int = 10_000
    """Most pooled transactions."""
    mempool_max_bytes: int = 32 * 1024 * 1024
    """Most pooled bytes."""
    mempool_max_txs_per_sender: int = 64
    """Most pooled transactions of one sender."""
    mempool_max_nonce_gap: int = 64
    """How far ahead of the account nonce a transaction may be."""
    mempool_replacement_bump_percent: int = 10
    """Fee increase a replacement needs on every fee field."""
    mempool_max_queued: int = 1_024
    """Most queued (nonce-gapped, not yet executable) transactions held in total (a value above
    ``mempool_max_txs`` lets queued ones fill the pool; they still never keep out an executable one)."""
    mempool_max_queued_per_sender: int = 16
    """Most queued transactions of one sender (``mempool_max_txs_per_sender`` caps all of a sender's)."""
    mempool_queued_lifetime_s: int = 600
    """Seconds a transaction may stay queued before it is dropped (1..86400)."""
    mempool_journal: bool = True
    """Journal admitted transactions to ``DATA/mempool.journal`` and re-admit them at start-up."""
    mempool_admission_workers: int = 0
    """Processes recovering the signatures of RPC-submitted transactions (``chain/signature_pool.py``); 0 recovers them
    in the validator process."""
    p2p_addr: str = DEFAULT_P2P_ADDR
    """Listen address of the validator peer layer (UDP with QUIC, the default; TCP with ``[p2p] transport = "tcp"``)."""
    p2p_peers: tuple[PeerAddress, ...] = ()
    """The other validators of the static set, with the address to dial each (distinct keys and addresses)."""
    p2p_max_message_bytes: int = 8 * _MIB
    """Largest consensus message accepted from a peer (64 KiB..64 MiB)."""
    p2p_tx_gossip_flush_ms: int = 50
    """Milliseconds a batch of gossiped transactions waits for more before it is sent to the peers (1..1000): longer
    batches cost less CPU per transaction, and delay its arrival at the other validators by as much."""
    p2p_transport: str = "quic"
    """What carries the links to the other validators: ``quic`` (aioquic) or ``tcp`` (TCP with an
    X25519/ChaCha20-Poly1305 record layer, ``docs/protocol.md``). Every validator of a network must name the same
    one. Runners always connect over QUIC (CIP-11)."""
    consensus_delta_ms: int = 0
    """Δ of the consensus timers in milliseconds; 0 chooses it automatically."""
    consensus_election: str = "random"
    """Leader election: ``random`` (from the beacon) or ``round_robin``."""
    consensus_skip_timeout_views: int = 10
    """A leader silent for this many views has its views nullified on entry, without the 2Δ wait (0: off)."""
    consensus_double_sign_check_views: int = 10
    """A validator (of several) that starts without its vote journal votes only once it is in sync and has
    watched this many views (CometBFT's ``double_sign_check_height``; 0: off)."""
    consensus_sync_verify_workers: int = 1
    """Processes verifying fetched blocks while catching up (``[consensus] sync_verify_workers``; 0: a thread)."""
    ui_peers: tuple[str, ...] = ()
    """``[ui] peers``: other validators' RPC URLs the network page (``/ui``) polls from the browser (docs/ui.md)."""
    ui_cors_origins: tuple[str, ...] = ()
    """``[ui] cors_origins``: origins whose pages may read ``/status`` and ``/ui/snapshot`` cross-origin (none)."""

    @property
    def data_path(self) -> Path:
        """Absolute data directory."""
        return self.home / self.data_dir

    @property
    def genesis_path(self) -> Path:
        """genesis.json."""
        return self.home / "genesis.json"

    @property
    def validator_key_path(self) -> Path:
        """keys/validator.key."""
        return self.home / "keys" / "validator.key"


def load_config(home: Path) -> NodeConfig:
    """Read ``home/config.toml`` (missing file: all defaults)."""
    path = home / "config.toml"
    p = str(path)
    if not path.exists():
        raise ConfigError(p, None, "not found; run `cowboy-node init --home DIR` first")
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(p, None, f"not valid TOML: {e}") from None
    values: dict[str, Any] = {}
    for section, body in doc.items():
        if section not in _SCHEMA:
            raise ConfigError(p, section, f"unknown section; allowed: {sorted(_SCHEMA)}")
        if not isinstance(body, dict):
            raise ConfigError(p, section, "expected a table")
        for key, value in body.items():
            full = f"{section}.{key}"
            expected = _SCHEMA[section].get(key)
            if expected is None:
                raise ConfigError(p, full, f"unknown key; allowed in [{section}]: {sorted(_SCHEMA[section])}")
            if type(value) is not expected:
                raise ConfigError(p, full, f"expected {expected.__name__}, got {type(value).__name__}")
            if isinstance(value, int) and not isinstance(value, bool):
                lo, hi = INT_BOUNDS.get(full, DEFAULT_INT_BOUNDS)
                if not lo <= value <= hi:
                    raise ConfigError(p, full, f"expected an integer in {lo}..{hi}, got {value}")
            values[full] = value
    cfg = NodeConfig(
        home=home,
        chain_id=values.get("node.chain_id"),
        block_time_ms=values.get("node.block_time_ms"),
        data_dir=values.get("node.data_dir", "data"),
        halt_height=values.get("node.halt_height"),
        storage_retain_blocks=values.get("storage.retain_blocks", 0),
        storage_prune_batch_blocks=values.get("storage.prune_batch_blocks", 64),
        snapshot_interval_blocks=values.get("snapshot.interval_blocks", 0),
        snapshot_keep=values.get("snapshot.keep", 2),
        snapshot_state_sync=values.get("snapshot.state_sync", False),
        snapshot_auto_state_sync=values.get("snapshot.auto_state_sync", True),
        snapshot_fallback_behind_blocks=values.get("snapshot.fallback_behind_blocks", 10_000),
        rpc_addr=values.get("rpc.addr", "127.0.0.1:4000"),
        rpc_advertise=values.get("rpc.advertise"),
        rpc_max_body_bytes=values.get("rpc.max_body_bytes", 1_048_576),
        rpc_max_submit_batch=values.get("rpc.max_submit_batch", 1000),
        rpc_max_connections=values.get("rpc.max_connections", 1024),
        rpc_max_connections_per_ip=values.get("rpc.max_connections_per_ip", 64),
        rpc_header_timeout_ms=values.get("rpc.header_timeout_ms", 10_000),
        rpc_idle_timeout_ms=values.get("rpc.idle_timeout_ms", 30_000),
        rpc_fd_reserve=values.get("rpc.fd_reserve", 256),
        rpc_read_max_concurrent=values.get("rpc.read_max_concurrent", 1),
        rpc_read_max_queue=values.get("rpc.read_max_queue", 32),
        rpc_read_max_wait_ms=values.get("rpc.read_max_wait_ms", 5000),
        rpc_read_call_timeout_ms=values.get("rpc.read_call_timeout_ms", 1000),
        rpc_read_budget_ms_per_s=values.get("rpc.read_budget_ms_per_s", 250),
        rpc_read_per_client_rps=values.get("rpc.read_per_client_rps", 10),
        rpc_subscription_max=values.get("rpc.subscription_max", 1000),
        rpc_subscription_buffer_bytes=values.get("rpc.subscription_buffer_bytes", 256 * 1024),
        rpc_subscription_send_timeout_ms=values.get("rpc.subscription_send_timeout_ms", 5000),
        rpc_subscription_max_lag_blocks=values.get("rpc.subscription_max_lag_blocks", 1000),
        rpc_subscription_replay_per_s=values.get("rpc.subscription_replay_per_s", 2000),
        quic_addr=values.get("quic.addr", "127.0.0.1:4433"),
        quic_advertise=values.get("quic.advertise"),
        quic_workers=values.get("quic.workers", 1),
        metrics_addr=values.get("metrics.addr", "127.0.0.1:9464"),
        metrics_enabled=values.get("metrics.enabled", True),
        log_format=values.get("log.format", "console"),
        log_level=values.get("log.level", "info"),
        mempool_max_txs=values.get("mempool.max_txs", 10_000),
        mempool_max_bytes=values.get("mempool.max_bytes", 32 * 1024 * 1024),
        mempool_max_txs_per_sender=values.get("mempool.max_txs_per_sender", 64),
        mempool_max_nonce_gap=values.get("mempool.max_nonce_gap", 64),
        mempool_replacement_bump_percent=values.get("mempool.replacement_bump_percent", 10),
        mempool_max_queued=values.get("mempool.max_queued", 1_024),
        mempool_max_queued_per_sender=values.get("mempool.max_queued_per_sender", 16),
        mempool_queued_lifetime_s=values.get("mempool.queued_lifetime_s", 600),
        mempool_journal=values.get("mempool.journal", True),
        mempool_admission_workers=values.get("mempool.admission_workers", 0),
        p2p_addr=values.get("p2p.addr", DEFAULT_P2P_ADDR),
        p2p_peers=parse_peers(values.get("p2p.peers", []), path=p),
        p2p_max_message_bytes=values.get("p2p.max_message_bytes", 8 * _MIB),
        p2p_tx_gossip_flush_ms=values.get("p2p.tx_gossip_flush_ms", 50),
        p2p_transport=values.get("p2p.transport", "quic"),
        consensus_delta_ms=values.get("consensus.delta_ms", 0),
        consensus_election=values.get("consensus.election", "random"),
        consensus_skip_timeout_views=values.get("consensus.skip_timeout_views", 10),
        consensus_double_sign_check_views=values.get("consensus.double_sign_check_views", 10),
        consensus_sync_verify_workers=values.get("consensus.sync_verify_workers", 1),
        ui_peers=parse_origins(values.get("ui.peers", []), path=p, key="ui.peers"),
        ui_cors_origins=parse_origins(values.get("ui.cors_origins", []), path=p, key="ui.cors_origins"),
    )
    if 0 < cfg.storage_retain_blocks < MIN_RETAIN_BLOCKS:
        raise ConfigError(p, "storage.retain_blocks", f"expected 0 (keep every block) or at least "
                                                      f"{MIN_RETAIN_BLOCKS}, got {cfg.storage_retain_blocks}")
    if cfg.log_format not in LOG_FORMATS:
        raise ConfigError(p, "log.format", f"expected one of {list(LOG_FORMATS)}, got {cfg.log_format!r}")
    if cfg.log_level not in LOG_LEVELS:
        raise ConfigError(p, "log.level", f"expected one of {list(LOG_LEVELS)}, got {cfg.log_level!r}")
    if cfg.p2p_transport not in TRANSPORTS:
        raise ConfigError(p, "p2p.transport", f"expected one of {list(TRANSPORTS)}, got {cfg.p2p_transport!r}")
    if cfg.consensus_election not in ELECTIONS:
        raise ConfigError(p, "consensus.election", f"expected one of {list(ELECTIONS)}, got {cfg.consensus_election!r}")
    for key, addr in (("rpc.addr", cfg.rpc_addr), ("quic.addr", cfg.quic_addr), ("metrics.addr", cfg.metrics_addr),
                      ("p2p.addr", cfg.p2p_addr)):
        split_host_port(addr, path=p, key=key)
    if cfg.quic_advertise is not None:
        host, port = split_host_port(cfg.quic_advertise, path=p, key="quic.advertise")
        if port == 0 or _is_wildcard(host):
            raise ConfigError(p, "quic.advertise", f"must be an address runners can dial, got {cfg.quic_advertise!r}")
    if cfg.rpc_advertise is not None and not _is_http_url(cfg.rpc_advertise):
        raise ConfigError(p, "rpc.advertise", f"expected an http(s)://HOST[:PORT] URL, got {cfg.rpc_advertise!r}")
    return cfg


def _is_wildcard(host: str) -> bool:
    """``0.0.0.0`` / ``::`` (any address): fine to listen on, useless to dial."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def advertised_quic(cfg: NodeConfig) -> str | None:
    """The QUIC endpoint runners dial for this validator: ``quic.advertise``, else ``quic.addr`` unless it is a
    wildcard (then None: nothing to announce)."""
    if cfg.quic_advertise is not None:
        return cfg.quic_advertise
    host, _ = split_host_port(cfg.quic_addr, path="config.toml", key="quic.addr")
    return None if _is_wildcard(host) else cfg.quic_addr


def advertised_rpc(cfg: NodeConfig) -> str | None:
    """The HTTP API URL announced to the other validators: ``rpc.advertise``, else ``http://`` + ``rpc.addr``
    unless it is a wildcard (then None)."""
    if cfg.rpc_advertise is not None:
        return cfg.rpc_advertise
    host, port = split_host_port(cfg.rpc_addr, path="config.toml", key="rpc.addr")
    return None if _is_wildcard(host) else "http://" + join_host_port(host, port)


def parse_origins(entries: list[Any], *, path: str, key: str) -> tuple[str, ...]:
    """``[ui] peers`` / ``[ui] cors_origins``: ``http(s)://HOST[:PORT]`` strings (at most ``MAX_PEERS``);
    errors name ``key[i]``."""
    if len(entries) > MAX_PEERS:
        raise ConfigError(path, key, f"at most {MAX_PEERS} entries, got {len(entries)}")
    out: list[str] = []
    for i, entry in enumerate(entries):
        try:
            out.append(parse_origin(entry))
        except ValueError as e:
            raise ConfigError(path, f"{key}[{i}]", str(e)) from None
    return tuple(out)


def parse_peers(entries: list[Any], *, path: str) -> tuple[PeerAddress, ...]:
    """``[p2p] peers``: ``"0x<64 hex>@HOST:PORT"`` strings (``[V6]:PORT`` for IPv6), no key and no address twice;
    errors name ``p2p.peers[i]``."""
    peers: list[PeerAddress] = []
    keys: dict[bytes, int] = {}
    addrs: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(entries):
        key = f"p2p.peers[{i}]"
        peer = parse_peer(entry, path=path, key=key)
        if (j := keys.setdefault(peer.public_key, i)) != i:
            raise ConfigError(path, key, f"duplicate public key (also p2p.peers[{j}])")
        if (j := addrs.setdefault((peer.host, peer.port), i)) != i:
            raise ConfigError(path, key, f"duplicate address (also p2p.peers[{j}])")
        peers.append(peer)
    return tuple(peers)


def parse_peer(entry: object, *, path: str, key: str) -> PeerAddress:
    """One ``0x<64 hex ed25519 public key>@HOST:PORT`` entry; errors name the file and ``key``."""
    expected = "expected \"0x<64 hex ed25519 public key>@HOST:PORT\""
    if not isinstance(entry, str):
        raise ConfigError(path, key, f"{expected}, got {type(entry).__name__}")
    key_text, at, addr = entry.partition("@")
    hex_part = key_text.removeprefix("0x")
    if not at or not key_text.startswith("0x") or len(hex_part) != 64 \
            or not all(c in "0123456789abcdefABCDEF" for c in hex_part):
        raise ConfigError(path, key, f"{expected}, got {entry!r}")
    host, port = split_host_port(addr, path=path, key=key)
    if port == 0:
        raise ConfigError(path, key, f"port 0 cannot be dialled, got {entry!r}")
    return PeerAddress(public_key=bytes.fromhex(hex_part), host=host, port=port)


def join_host_port(host: str, port: int) -> str:
    """``HOST:PORT``, with an IPv6 host in brackets (the inverse of :func:`split_host_port`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def format_peer(peer: PeerAddress) -> str:
    """``peer`` as written in ``[p2p] peers`` (the inverse of :func:`parse_peer`)."""
    return f"0x{peer.public_key.hex()}@{join_host_port(peer.host, peer.port)}"


def split_host_port(text: str, *, path: str, key: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` or ``[V6]:PORT``; errors name the file and the key."""
    try:
        return parse_host_port(text, key=key)
    except ValueError as e:
        raise ConfigError(path, key, str(e).removeprefix(f"{key}: ")) from None


def render_config(*, chain_id: str, rpc_addr: str, quic_addr: str, metrics_addr: str,
                  block_time_ms: int | None, p2p_addr: str = DEFAULT_P2P_ADDR,
                  p2p_peers: Sequence[PeerAddress] = (), ui_peers: Sequence[str] = (),
                  ui_cors_origins: Sequence[str] = ()) -> str:
    """The commented config.toml written by ``cowboy-node init`` and ``cowboy-node testnet`` (which gives
    ``ui_peers`` / ``ui_cors_origins``: the other validators' RPC URLs, so each page shows and reads them all)."""
    bt = f"block_time_ms = {block_time_ms}" if block_time_ms else "# block_time_ms = 1000"
    peers = "".join(f'\n    "{format_peer(peer)}",' for peer in p2p_peers)
    peers = f"[{peers}\n]" if peers else "[]"
    ui = "" if not (ui_peers or ui_cors_origins) else (
        "\n[ui]\n# The network page (/ui, docs/ui.md): other validators' RPC URLs it shows, and the origins whose "
        "pages may\n# read this node's /status and /ui/snapshot (the other validators' pages).\n"
        f"peers = {json.dumps(list(ui_peers))}\ncors_origins = {json.dumps(list(ui_cors_origins))}\n")
    return _render_local(chain_id, bt) + _render_endpoints(rpc_addr, quic_addr, metrics_addr) + \
        _render_pools_and_peers(p2p_addr, peers, ui)


def _render_local(chain_id: str, bt: str) -> str:
    """``[node]``, ``[storage]`` and ``[snapshot]`` of :func:`render_config` (the header comment first)."""
    return f"""\
# cowboy-node configuration. Consensus parameters live in genesis.json;
# this file holds local settings only. Unknown keys are rejected at start-up.

[node]
# Informational: must match genesis.json's chain_id if set.
chain_id = "{chain_id}"
# Local override of the block interval in milliseconds (default: genesis params.block_time_ms).
{bt}
# LevelDB directory, relative to the home directory.
data_dir = "data"
# Commit this height, then exit 0 with "halt height reached" (coordinated upgrades; absent = never).
# `cowboy-node run --halt-height H` does the same for one run.
# halt_height = 1000000

[storage]
# Keep the blocks, receipts, certificates and indexes of the newest retain_blocks heights; older ones are
# deleted in small batches after each block (0 = keep everything, an archive node; else at least 100).
# Requests below the earliest kept height answer 410 pruned; GET /status shows it. docs/operations.md, "Prune".
retain_blocks = 0
# Heights one prune step deletes at most (one step after each committed block).
# prune_batch_blocks = 64

[snapshot]
# Take a state snapshot into HOME/snapshots every interval_blocks blocks, keeping the newest `keep`
# (0 = none; `cowboy-node snapshot create|list|export|import`, docs/operations.md, "Snapshots").
interval_blocks = 0
keep = 2
# A validator (of several) starting with an empty data directory first fetches the other validators' newest
# snapshot (every chunk verified against the finalized state root), installs it, then block-syncs from there.
# state_sync = false
# A running validator that block sync cannot catch up (every peer ahead pruned the blocks it needs, or one is
# fallback_behind_blocks ahead) restarts into a state sync by itself, then block-syncs from the snapshot
# (docs/operations.md, "Join"). Its older blocks are dropped. false: never; it then waits for an operator.
# auto_state_sync = true
# fallback_behind_blocks = 10000

"""


def _render_endpoints(rpc_addr: str, quic_addr: str, metrics_addr: str) -> str:
    """``[rpc]``, ``[quic]``, ``[metrics]`` and ``[log]`` of :func:`render_config`."""
    return f"""\
[rpc]
# HTTP API (POST /submit, GET /status, ...). Keep it on loopback unless fronted by a proxy.
addr = "{rpc_addr}"
# URL the other validators' runners may fail over to (announced to the other validators). Default:
# http://addr unless addr is a wildcard address. Set it when the API is reached through a proxy or another name.
# advertise = "https://validator-0.example.net"
# Largest request body accepted (bytes, at most 64 MiB).
max_body_bytes = 1048576
# Most transactions in one POST /submit/batch (each admitted as POST /submit would; a larger batch gets 413).
max_submit_batch = 1000
# Most open connections in all; lowered at start-up to (open-file limit - fd_reserve) when that is smaller.
max_connections = 1024
# Most open connections from one source address; further ones get 503 too_many_connections and are closed.
max_connections_per_ip = 64
# A request's headers must be complete this many milliseconds after the connection opened (or after the
# first byte of a later request on a kept-alive connection); else 408 header_timeout and the connection closes.
header_timeout_ms = 10000
# A kept-alive connection with no request in progress is closed after this many milliseconds.
idle_timeout_ms = 30000
# File descriptors the API never uses, kept for LevelDB, QUIC and the node's other sockets.
fd_reserve = 256
# Read-only actor calls (POST /actor/read) run in a bounded pool so they cannot stall block production.
# Calls running at once (worker threads; with the GIL, more only take more time from the block producer).
read_max_concurrent = 1
# Calls waiting for a worker; more get 503 busy (Retry-After: 1).
read_max_queue = 32
# Longest a call waits for a worker, in milliseconds; then 503 busy (it never ran).
read_max_wait_ms = 5000
# Wall-clock limit of one call in milliseconds; then it stops with error read_timeout.
read_call_timeout_ms = 1000
# Execution milliseconds all calls may use per second (250 = a quarter of one core); when spent, 503 busy
# with Retry-After until it refills.
read_budget_ms_per_s = 250
# Calls per second one client address may start (bursts of twice that); more get 429 rate_limited.
read_per_client_rps = 10
# Live subscriptions (GET /subscribe, a WebSocket): most open at once (more get 503 too_many_subscriptions).
subscription_max = 1000
# Socket write buffer of one subscription (bytes); a subscriber that leaves it full for
# subscription_send_timeout_ms milliseconds is a slow consumer: told, dropped, free to resume with from=H.
subscription_buffer_bytes = 262144
subscription_send_timeout_ms = 5000
# Deepest resumption (from = up to this many blocks below the head) and largest lag before a drop.
subscription_max_lag_blocks = 1000
# Heights all subscriptions together may catch up per second (replays after a reconnect; the newest height is
# never held back), so a crowd of resuming clients cannot take the event loop from block production.
subscription_replay_per_s = 2000

[quic]
# CIP-11 runner transport (UDP).
addr = "{quic_addr}"
# HOST:PORT runners dial for this validator (announced to the other validators, listed by GET /validators).
# Default: addr, unless addr is a wildcard address (0.0.0.0 or [::]); then set it.
# advertise = "validator-0.example.net:4433"
# Worker processes terminating QUIC+TLS (they share addr; sessions stay in the validator process). A validator
# for ~5,000 runners wants 3 on 5 cores (docs/performance.md); 1 = QUIC in the validator process.
# workers = 1

[metrics]
# Prometheus exposition at http://ADDR/metrics (namespace cowboy_).
addr = "{metrics_addr}"
enabled = true

[log]
# "console" for humans, "json" for log shippers.
format = "console"
# debug | info | warning | error
level = "info"

"""


def _render_pools_and_peers(p2p_addr: str, peers: str, ui: str) -> str:
    """``[mempool]``, ``[p2p]``, ``[consensus]`` and the optional ``[ui]`` of :func:`render_config`."""
    return f"""\
[mempool]
# Most transactions / bytes held; when full, a new transaction must outbid the cheapest evictable one.
max_txs = 10000
max_bytes = 33554432
# Most pending transactions per sender, and how far ahead of the account nonce they may be.
max_txs_per_sender = 64
max_nonce_gap = 64
# A replacement (same sender and nonce) must raise every fee field by at least this percentage.
replacement_bump_percent = 10
# Queued = nonce-gapped: not executable until the missing nonces arrive. Most held in total and per
# sender; they are evicted first when the pool is full and never keep out an executable transaction.
max_queued = 1024
max_queued_per_sender = 16
# Seconds a transaction may stay queued before it is dropped (1..86400).
queued_lifetime_s = 600
# Journal admitted transactions to DATA/mempool.journal and re-admit them at start-up (survives kill -9).
journal = true
# Processes that recover the signatures of submitted transactions in batches (0..64; 0 = in this process).
# Worth 1 on a validator with a spare core under heavy submission load (docs/performance.md, throughput).
# admission_workers = 0

[p2p]
# Validator peer layer between the validators of the static set (QUIC over UDP, or TCP: see transport).
addr = "{p2p_addr}"
# The other validators: "0x<ed25519 public key>@HOST:PORT" ([V6]:PORT for IPv6), each key as in genesis.json.
peers = {peers}
# Largest consensus message accepted from a peer (bytes, 65536..67108864).
max_message_bytes = 8388608
# Transactions gossiped to the other validators wait this long for more before a batch is sent (ms, 1..1000).
# tx_gossip_flush_ms = 50
# What carries the links to the other validators: "quic" or "tcp"; every validator of a network names the same one.
# transport = "quic"

[consensus]
# Delta of the consensus timers in milliseconds; 0 chooses it automatically.
delta_ms = 0
# Leader election: "random" (from the beacon) or "round_robin".
election = "random"
# A leader from whom no vote arrived for this many views is presumed down: its views are nullified at once
# instead of after the 2*delta leader timeout (0 disables).
skip_timeout_views = 10
# A validator started without its vote journal (data/consensus-votes.journal: a wiped or lost data directory)
# does not vote until it is in sync and has watched this many views, so it cannot contradict a vote it sent
# before (0..100000; 0 disables). `cowboy-node run --fresh-key` skips the watch for a key that never signed.
# double_sign_check_views = 10
# Worker processes that verify the blocks a lagging validator fetches (decoding, certificates, transaction
# signatures), so catching up uses another core beside execution; started only when syncing (0..16; 0: a thread).
# sync_verify_workers = 1
{ui}"""
