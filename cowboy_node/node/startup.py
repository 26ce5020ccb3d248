"""Start-up and shutdown of ``cowboy-node run``: checks, servers, signals."""

from __future__ import annotations

import asyncio
import errno
import signal
from pathlib import Path

from aiohttp import web

from cowboy_node.chain.blockstore import KEY_INSTALLING, BlockStore
from cowboy_node.chain.chain import Chain, ChainError
from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.genesis import Genesis, check_interpreter, load_genesis
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.mempool_journal import MEMPOOL_JOURNAL_FILE, MempoolJournal, restore_mempool
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, JournalError, VoteJournal
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.stop import StopSignal
from cowboy_node.execution.system_state import get_cip11_flags
from cowboy_node.node.assemble import PeerFactory, TransportFactory, assemble, validator_index
from cowboy_node.node.config import NodeConfig, advertised_quic, advertised_rpc, load_config, split_host_port
from cowboy_node.node.keys import ValidatorKey, load_validator_key
from cowboy_node.node.node import Node
from cowboy_node.node.snapshotter import Snapshotter
from cowboy_node.node.statesync_fallback import FallbackPolicy, FallbackTrigger, state_sync_if_requested
from cowboy_node.node.statesync_link import state_sync_link
from cowboy_node.node.statesync_link import validator_index as key_index
from cowboy_node.observability.logging import configure_logging, get_logger
from cowboy_node.observability.metrics import NodeMetrics, start_metrics_server
from cowboy_node.observability.peer_metrics import PeerMetrics
from cowboy_node.p2p.peers import PeerInfo, PeerLimits, PeerNetwork
from cowboy_node.rpc.conn_limits import ConnLimits
from cowboy_node.rpc.read_pool import ReadPool, ReadPoolConfig
from cowboy_node.rpc.server import start_rpc_server
from cowboy_node.rpc.subscription_source import ChainSource
from cowboy_node.rpc.subscriptions import SubscriptionHub, SubscriptionLimits
from cowboy_node.rpc.ui_routes import UiConfig
from cowboy_node.snapshot.create import SNAPSHOT_DIR
from cowboy_node.snapshot.manifest import SnapshotError
from cowboy_node.state.kv_store import StoreError
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.transport.service import TransportConfig, TransportService
from cowboy_protocol.keys import KeyFileError, check_secret_mode
from cowboy_protocol.transport.preimages import ValidatorKey as TransportValidatorKey

log = get_logger("cowboy.node")

QUIC_CERT_FILE = "quic-cert.pem"
QUIC_KEY_FILE = "quic-key.pem"
"""The QUIC TLS key, in the home directory: a secret like keys/validator.key (``run`` refuses it when group or
others may access it)."""


class StartupError(Exception):
    """The node cannot start; the message names the file/key and what was expected."""


class NodeFailed(Exception):
    """The node stopped on a fatal error after it started (the vote journal could not be written); the message
    names the file and the errno. ``cowboy-node run`` exits non-zero."""


P2P_CERT_FILE = "p2p-cert.pem"
P2P_KEY_FILE = "p2p-key.pem"
"""The validator peer layer's TLS key, in the home directory (identity is proven by the Ed25519 handshake)."""
P2P_IDLE_TIMEOUT_S = 5.0
"""Peer connections with nothing received for this long are dropped and redialled. Short because a restarted
validator's peers would otherwise keep sending into the old process's dead connection (QUIC without stateless
reset) for the whole timeout; healthy links carry consensus traffic and a status message every second."""


def peer_infos(cfg: NodeConfig, genesis: Genesis, me: int, path: str) -> list[PeerInfo]:
    """``[p2p] peers`` as the peer layer's list: every other genesis validator, each once (an unknown key there,
    this validator itself, or a missing validator stops start-up naming the key)."""
    validators = genesis.validators
    index = {v.ed25519_public_key: i for i, v in enumerate(validators)}
    peers = []
    for i, p in enumerate(cfg.p2p_peers):
        j = index.get(p.public_key)
        if j is None:
            raise ConfigError(path, f"p2p.peers[{i}]", "key is not a genesis validator")
        if j == me:
            raise ConfigError(path, f"p2p.peers[{i}]", "lists this validator itself")
        peers.append(PeerInfo(j, p.public_key, p.host, p.port))
    missing = sorted(set(range(len(validators))) - {p.index for p in peers} - {me})
    if missing:
        names = ", ".join(validators[i].name for i in missing)
        raise ConfigError(path, "p2p.peers", f"no address for genesis validator(s) {names}")
    return peers


async def state_sync_if_empty(cfg: NodeConfig, home: Path, genesis: Genesis, store: LevelDBStore,
                              ed25519_seed: bytes) -> None:
    """``[snapshot] state_sync``: when the data directory holds no chain (or an interrupted install), fetch the other
    validators' newest snapshot over a peer layer of its own (closed after), verify and install it
    (``node/statesync.py``). With no peer connected or no snapshot offered (a new network) the node goes on from
    genesis; any other failure raises :class:`StartupError` naming the refusal code (nothing is installed)."""
    if not cfg.snapshot_state_sync or len(genesis.validators) == 1:
        return
    if BlockStore(store).head_height() is not None and store.get(KEY_INSTALLING) is None:
        return
    me = key_index(genesis, ed25519_seed)
    if me is None:
        return  # the node refuses this key right after, naming it
    path = str(home / "config.toml")
    sync, net = state_sync_link(cfg, genesis, ed25519_seed, me, config_path=path,
                                peers=lambda i: peer_infos(cfg, genesis, i, path), cert_path=home / P2P_CERT_FILE,
                                key_path=home / P2P_KEY_FILE, idle_timeout_s=P2P_IDLE_TIMEOUT_S)
    log.info("empty data directory: state-syncing from the other validators' snapshots", data=str(cfg.data_path))
    await net.start()
    try:
        await sync.run(store, cfg.data_path, cfg.data_path.parent / (cfg.data_path.name + ".statesync"))
    except SnapshotError as e:
        if e.code in ("no_peer", "no_snapshot"):  # a new network, or no peer keeps snapshots: nothing to join from
            log.warning("state sync: no snapshot to join from; block-syncing from genesis", code=e.code,
                        error=str(e))
            return
        raise StartupError(f"state sync failed ({e.code}): {e}; start again to retry, or with [snapshot] "
                           "state_sync = false to block-sync from genesis instead") from None
    finally:
        await net.stop()


def peer_factory(cfg: NodeConfig, home: Path, genesis: Genesis, me: int, ed25519_seed: bytes,
                 metrics: NodeMetrics) -> PeerFactory | None:
    """How ``assemble`` builds the validator peer layer when the genesis has more than one validator (started by
    :func:`run_node`, which raises OSError if the UDP address cannot be bound).

    Every other genesis validator must appear in ``[p2p] peers`` (an unknown key there, or a missing validator,
    stops start-up naming the key).
    """
    validators = genesis.validators
    if len(validators) == 1:
        return None
    path = str(home / "config.toml")
    peers = peer_infos(cfg, genesis, me, path)
    host, port = split_host_port(cfg.p2p_addr, path=path, key="p2p.addr")
    return lambda on_message: PeerNetwork(
        me=me, ed25519_seed=ed25519_seed, listen_host=host, listen_port=port, peers=peers,
        validator_keys=[v.ed25519_public_key for v in validators], network_id=genesis.hash(),
        cert_path=home / P2P_CERT_FILE, key_path=home / P2P_KEY_FILE, on_message=on_message,
        limits=PeerLimits(max_message_bytes=cfg.p2p_max_message_bytes, idle_timeout_s=P2P_IDLE_TIMEOUT_S,
                          transport=cfg.p2p_transport),
        metrics=PeerMetrics(metrics.registry))


def transport_factory(chain: Chain, home: Path, quic_addr: str, ed25519_seed: bytes, metrics: NodeMetrics,
                      workers: int = 1) -> TransportFactory | None:
    """How ``assemble`` builds the CIP-11 QUIC transport when the chain's ``CIP11_TRANSPORT_ENABLED`` flag is set
    (phase ≥ 1); :func:`run_node` starts it (OSError if the UDP address cannot be bound).

    The certificate is self-signed and kept in the home directory (identity is proven by the CIP-11 HelloAck,
    not by the certificate).
    """
    if not get_cip11_flags(chain.world()).CIP11_TRANSPORT_ENABLED:
        return None
    host, port = split_host_port(quic_addr, path=str(home / "config.toml"), key="quic.addr")
    config = TransportConfig(host=host, port=port, cert_path=home / QUIC_CERT_FILE, key_path=home / QUIC_KEY_FILE,
                             workers=workers)
    return lambda link: TransportService(link, TransportValidatorKey(ed25519_seed),
                                         validator_set_hash=link.genesis_snapshot().set_hash, metrics=metrics,
                                         config=config)


def read_pool(cfg: NodeConfig, metrics: NodeMetrics) -> ReadPool:
    """The bounded pool of ``POST /actor/read`` from ``[rpc] read_*`` (the RPC app closes it on cleanup)."""
    return ReadPool(ReadPoolConfig(max_concurrent=cfg.rpc_read_max_concurrent, max_queue=cfg.rpc_read_max_queue,
                                   max_wait_ms=cfg.rpc_read_max_wait_ms, call_timeout_ms=cfg.rpc_read_call_timeout_ms,
                                   budget_ms_per_s=cfg.rpc_read_budget_ms_per_s,
                                   per_client_rps=cfg.rpc_read_per_client_rps), metrics=metrics)


def conn_limits(cfg: NodeConfig) -> ConnLimits:
    """The HTTP API's connection limits from ``[rpc]`` (the global cap is fitted to the open-file limit later)."""
    return ConnLimits(max_connections=cfg.rpc_max_connections, max_connections_per_ip=cfg.rpc_max_connections_per_ip,
                      header_timeout_ms=cfg.rpc_header_timeout_ms, idle_timeout_ms=cfg.rpc_idle_timeout_ms,
                      fd_reserve=cfg.rpc_fd_reserve)


def subscription_hub(cfg: NodeConfig, chain: Chain) -> SubscriptionHub:
    """The hub of ``GET /subscribe`` from ``[rpc] subscription_*`` (``assemble`` makes it a commit listener)."""
    return SubscriptionHub(ChainSource(chain), SubscriptionLimits(
        max_subscriptions=cfg.rpc_subscription_max, buffer_bytes=cfg.rpc_subscription_buffer_bytes,
        send_timeout_ms=cfg.rpc_subscription_send_timeout_ms, max_lag_blocks=cfg.rpc_subscription_max_lag_blocks,
        replay_per_s=cfg.rpc_subscription_replay_per_s))


def open_node(cfg: NodeConfig, home: Path, chain: Chain, mempool: Mempool, key: ValidatorKey, *,
              fresh_key: bool) -> tuple[Node, MempoolJournal | None, SubscriptionHub, list[FallbackTrigger]]:
    """Replay the mempool journal and assemble the node from ``cfg`` (nothing started yet): the node, its mempool
    journal (closed by the caller), the subscription hub and the state-sync fall-back trigger it made (if any).
    Raises :class:`StartupError` (the caller closes the store)."""
    genesis = chain.genesis
    metrics = NodeMetrics()
    policy = FallbackPolicy(cfg.snapshot_auto_state_sync, cfg.snapshot_fallback_behind_blocks)
    fallback: list[FallbackTrigger] = []  # the trigger assemble made (its reason is read after the run)

    def fallback_trigger(stop: StopSignal) -> FallbackTrigger:
        fallback.append(FallbackTrigger(policy, cfg.data_path, stop=stop.request))
        return fallback[0]

    try:
        me = validator_index(chain, key)
    except ValueError as e:
        raise StartupError(f"{cfg.validator_key_path}: {e}") from None
    mempool_journal = None
    if cfg.mempool_journal:  # re-admit what was pooled before a restart or crash (no nonce gaps after restart)
        mempool_journal = MempoolJournal(cfg.data_path / MEMPOOL_JOURNAL_FILE)
        try:
            restored = restore_mempool(mempool_journal, chain, mempool)
        except OSError as e:
            raise StartupError(f"{mempool_journal.path}: {e}") from None
        log.info("mempool journal replayed", **restored)
    hub = subscription_hub(cfg, chain)
    try:
        transport_of = transport_factory(chain, home, cfg.quic_addr, key.ed25519_seed, metrics, cfg.quic_workers)
        node = assemble(chain, mempool, key, block_time_ms=cfg.block_time_ms or genesis.block_time_ms,
                        metrics=metrics, delta_ms=cfg.consensus_delta_ms, election=Election(cfg.consensus_election),
                        skip_timeout_views=cfg.consensus_skip_timeout_views,
                        journal=VoteJournal(cfg.data_path / VOTE_JOURNAL_FILE),
                        admission_workers=cfg.mempool_admission_workers, tx_gossip_flush_ms=cfg.p2p_tx_gossip_flush_ms,
                        double_sign_check_views=cfg.consensus_double_sign_check_views, fresh_key=fresh_key,
                        sync_verify_workers=cfg.consensus_sync_verify_workers,
                        retain_blocks=cfg.storage_retain_blocks, prune_batch_blocks=cfg.storage_prune_batch_blocks,
                        snapshotter=Snapshotter(chain, home / SNAPSHOT_DIR,
                                                interval_blocks=cfg.snapshot_interval_blocks,
                                                keep=cfg.snapshot_keep) if cfg.snapshot_interval_blocks else None,
                        snapshot_dir=home / SNAPSHOT_DIR,
                        state_sync_fallback=fallback_trigger if len(genesis.validators) > 1 else None,
                        mempool_journal=mempool_journal,
                        peers=peer_factory(cfg, home, genesis, me, key.ed25519_seed, metrics),
                        transport=transport_of,
                        quic_advertise=advertised_quic(cfg) if transport_of is not None else None,
                        rpc_advertise=(advertised_rpc(cfg) or "") if transport_of is not None else "",
                        commit_listeners=(hub.publish,))
    except ConfigError as e:
        raise StartupError(str(e)) from None
    except ValueError as e:
        raise StartupError(f"{cfg.validator_key_path}: {e}") from None
    return node, mempool_journal, hub, fallback


async def run_node(home: Path, *, fresh_key: bool = False, halt_height: int | None = None) -> int:
    """Open everything, serve and produce until SIGTERM/SIGINT, then close cleanly. Returns the exit code.

    ``fresh_key`` (``run --fresh-key``): vote at once even without a vote journal (the double-sign guard,
    ``[consensus] double_sign_check_views``, is skipped). Raises :class:`StartupError` when the node cannot start
    (a vote journal that cannot be read, or that holds conflicting own votes, included) and :class:`NodeFailed`
    when it stopped on a vote journal write error. ``halt_height`` (``run --halt-height``) overrides
    ``[node] halt_height``: the node commits that height, then stops and returns 0."""
    cfg, genesis, key = _load_settings(home)
    store = await _open_store(cfg, home, genesis, key)
    chain, halt = _open_chain(cfg, home, genesis, store, halt_height)
    mempool = Mempool(MempoolConfig(
        max_txs=cfg.mempool_max_txs, max_bytes=cfg.mempool_max_bytes,
        max_txs_per_sender=cfg.mempool_max_txs_per_sender, max_nonce_gap=cfg.mempool_max_nonce_gap,
        replacement_bump_percent=cfg.mempool_replacement_bump_percent, max_queued=cfg.mempool_max_queued,
        max_queued_per_sender=cfg.mempool_max_queued_per_sender, queued_lifetime_s=cfg.mempool_queued_lifetime_s))
    try:
        node, mempool_journal, hub, fallback = open_node(cfg, home, chain, mempool, key, fresh_key=fresh_key)
    except StartupError:
        store.close()
        raise
    transport, peers = node.transport, node.net

    # Before anything listens: a SIGTERM that arrives once /health answers must stop the node cleanly (exit 0), not
    # kill it with the default handler while the other servers are still starting.
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, node.request_stop)
    runners = await _start_servers(cfg, home, node, hub, store)

    log.info("node started", chain_id=genesis.chain_id, height=chain.height, rpc=cfg.rpc_addr,
             quic=f"{cfg.quic_addr} (udp)" if transport is not None else None,
             metrics=cfg.metrics_addr if cfg.metrics_enabled else None, data=str(cfg.data_path),
             validators=len(genesis.validators), me=node.index, halt_height=halt,
             retain_blocks=cfg.storage_retain_blocks or None, earliest=chain.earliest_height(),
             p2p=f"{cfg.p2p_addr} ({'tcp' if cfg.p2p_transport == 'tcp' else 'udp'})" if peers is not None else None)
    try:
        try:
            await node.run()
        except JournalError as e:  # raised while the engine starts: unreadable or conflicting journal
            raise StartupError(str(e)) from None
    finally:
        if peers is not None:
            await peers.stop()
        if transport is not None:
            await transport.stop()
        for r in runners:
            await r.cleanup()
        if mempool_journal is not None:
            try:
                mempool_journal.close()
            except OSError as e:
                log.error("mempool journal write failed", path=str(mempool_journal.path), error=str(e))
        chain.close()
        log.info("node stopped", height=chain.height)
    fatal = node.consensus.fatal
    if fatal is not None:
        raise NodeFailed(f"{fatal.path}: vote journal write failed ({fatal.errno_name}, errno {fatal.errno}): "
                         f"{fatal}; the node stopped before sending the vote. Free space or fix the disk, then "
                         "restart (the journal is kept; a torn last record is dropped)")
    if fallback and fallback[0].reason is not None:  # issue 34: restart into the state sync
        return await run_node(home, halt_height=halt_height)
    return 0


def _load_settings(home: Path) -> tuple[NodeConfig, Genesis, ValidatorKey]:
    """The config (logging configured from it), the genesis and the validator key, each checked."""
    try:
        cfg = load_config(home)
        configure_logging(cfg.log_format, cfg.log_level)
        genesis = load_genesis(cfg.genesis_path)
        check_interpreter(genesis.pvm_version, cfg.genesis_path)
        if cfg.chain_id is not None and cfg.chain_id != genesis.chain_id:
            raise ConfigError(str(home / "config.toml"), "node.chain_id",
                              f"{cfg.chain_id!r} does not match genesis.json chain_id {genesis.chain_id!r}")
        key = load_validator_key(cfg.validator_key_path)  # refuses a key group or others may access
        quic_key = home / QUIC_KEY_FILE
        if quic_key.exists() or quic_key.is_symlink():
            check_secret_mode(quic_key)
    except (ConfigError, KeyFileError) as e:
        raise StartupError(str(e)) from None
    return cfg, genesis, key


async def _open_store(cfg: NodeConfig, home: Path, genesis: Genesis, key: ValidatorKey) -> LevelDBStore:
    """The LevelDB store, state-synced first when empty or when a fall-back to state sync is pending."""
    try:
        store = LevelDBStore(cfg.data_path)
    except StoreError as e:
        raise StartupError(str(e)) from None
    try:
        await state_sync_if_empty(cfg, home, genesis, store, key.ed25519_seed)
        await state_sync_if_requested(  # issue 34: the automatic fall-back to state sync, when one is pending
            cfg, home, genesis, store, key.ed25519_seed, cert_path=home / P2P_CERT_FILE, key_path=home / P2P_KEY_FILE,
            peers=lambda me: peer_infos(cfg, genesis, me, str(home / "config.toml")), idle_timeout_s=P2P_IDLE_TIMEOUT_S)
    except SnapshotError as e:
        store.close()
        raise StartupError(f"fall-back to state sync failed ({e.code}): {e}; start again to retry") from None
    except (StartupError, ConfigError, OSError) as e:
        store.close()
        raise StartupError(str(e)) from None
    return store


def _open_chain(cfg: NodeConfig, home: Path, genesis: Genesis, store: LevelDBStore,
                halt_height: int | None) -> tuple[Chain, int | None]:
    """The chain on ``store`` and the height it halts at (``--halt-height`` over ``[node] halt_height``); the
    store is closed when it cannot be opened or has already passed that height."""
    halt = halt_height if halt_height is not None else cfg.halt_height
    try:
        chain = Chain(store, genesis, halt_height=halt)
    except ChainError as e:
        store.close()
        raise StartupError(f"{cfg.data_path}: {e}") from None
    if halt is not None and chain.height >= halt:
        store.close()
        where = "--halt-height" if halt_height is not None else f"{home / 'config.toml'}: node.halt_height"
        raise StartupError(f"{where}: {halt} is at or below the committed head {chain.height}; the node halted "
                           "there already (remove it, or set a later height, to run on)")
    return chain, halt


async def _start_servers(cfg: NodeConfig, home: Path, node: Node, hub: SubscriptionHub,
                         store: LevelDBStore) -> list[web.AppRunner]:
    """Start the RPC and metrics servers, the QUIC transport and the peer layer; returns the HTTP runners. A
    listener that cannot be opened closes what was started and the store, naming its setting."""
    metrics, transport, peers = node.metrics, node.transport, node.net
    runners: list[web.AppRunner] = []
    binding = ("rpc.addr", cfg.rpc_addr)  # the listener being opened, named if it fails (a port clash)
    try:
        host, port = split_host_port(cfg.rpc_addr, path=str(home / "config.toml"), key="rpc.addr")
        runners.append(await start_rpc_server(node.api, host, port, max_body_bytes=cfg.rpc_max_body_bytes,
                                              max_submit_batch=cfg.rpc_max_submit_batch,
                                              metrics=metrics, read_pool=read_pool(cfg, metrics),
                                              conn_limits=conn_limits(cfg),
                                              ui=UiConfig(cfg.ui_peers, frozenset(cfg.ui_cors_origins)),
                                              subscriptions=hub))
        if cfg.metrics_enabled:
            binding = ("metrics.addr", cfg.metrics_addr)
            mhost, mport = split_host_port(cfg.metrics_addr, path=str(home / "config.toml"), key="metrics.addr")
            runners.append(await start_metrics_server(metrics, mhost, mport))
        binding = ("quic.addr", f"{cfg.quic_addr} (UDP)")
        if transport is not None:
            await transport.start()
        binding = ("p2p.addr", f"{cfg.p2p_addr} (UDP)")
        if peers is not None:
            await peers.start()
    except ConfigError as e:
        for r in runners:
            await r.cleanup()
        store.close()
        raise StartupError(str(e)) from None
    except OSError as e:
        for r in runners:
            await r.cleanup()
        store.close()
        setting, addr = binding
        clash = " (another process holds it: a node already running on this home or another one?)" \
            if e.errno == errno.EADDRINUSE else ""
        raise StartupError(f"{home / 'config.toml'}: {setting}: cannot listen on {addr}: {e.strerror or e}{clash}; "
                           f"stop that process or change {setting}") from None
    return runners
