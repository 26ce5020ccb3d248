"""``cowboy-runner run``: the runner daemon.

Start-up: load ``runner.toml`` and the key, read ``/status`` (chain id, the validator-set snapshot, from which
``Sub(R)`` is computed: k = 1 with one validator, §5.1 otherwise) and ``/params``, open the journal, build the
executors, resume every pending obligation, then run concurrently:

* one :class:`~cowboy_runner.link.Link` per validator of ``Sub(R)`` (QUIC session, reconnects with the §11.3
  backoff);
* the head loop: poll ``/height`` twice per block time; on each new head run ``JobManager.tick`` (inclusions,
  reveals, expiry, REST rebroadcasts) and the §6.6 on-chain heartbeat;
* the poll fallback (``cowboy_runner.poll``) while no session is up;
* the status writer (``status.json`` every second) and, when enabled, the Prometheus endpoint.

Signals: SIGTERM/SIGINT stop at once (the journal keeps every obligation); SIGUSR1 drains: stop accepting
(backpressure on the session, ``Reject(Draining)``), let in-flight executions finish and their result transactions
be signed, journaled and sent, then exit 0 (still-unsettled signed transactions are resumed on the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Mapping
from typing import Any

import structlog

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import ApiError, NodeUnreachable
from cowboy_protocol.transport.frames import JobAssignment
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.subset import MAX_SUBSET, MIN_SUBSET
from cowboy_runner.chain_client import ChainClient
from cowboy_runner.chain_duties import ChainDuties
from cowboy_runner.config import ConfigError, RunnerSettings
from cowboy_runner.executor_settings import check_isolation, executors_config, kind_limits
from cowboy_runner.executors import ExecutorRegistry
from cowboy_runner.executors.health import HealthMonitor
from cowboy_runner.jobs import JobManager
from cowboy_runner.journal import Journal
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link, LinkConfig
from cowboy_runner.metrics import RunnerMetrics
from cowboy_runner.policy import refusal_policy
from cowboy_runner.poll import Poller
from cowboy_runner.reconfig import EpochLink, link_key, planned_keys, stale_links
from cowboy_runner.schedule import backoff_delay
from cowboy_runner.sessions_plan import (
    SessionTarget,
    Snapshot,
    SnapshotError,
    discovered_endpoints,
    discovered_rpc_urls,
    plan_sessions,
    snapshot_from_status,
)
from cowboy_runner.status import remove_pid, running_status, write_pid, write_status
from cowboy_runner.txbuild import Fees

log = structlog.get_logger("cowboy.runner.daemon")

DISCOVERY_INTERVAL_S = 5.0
"""Seconds between ``GET /validators`` retries while a subset member has no known QUIC endpoint."""


class StartupError(Exception):
    """The daemon cannot start; ``exit_code`` is the documented CLI exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def configure_logging(fmt: str, level: str) -> None:
    """structlog (and the stdlib loggers of the transport) to stderr, console or JSON lines."""
    lvl = getattr(logging, level.upper())
    logging.basicConfig(level=lvl, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    renderer: Any = structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer(
        colors=False)
    structlog.configure(processors=[structlog.processors.add_log_level,
                                    structlog.processors.TimeStamper(fmt="iso"), renderer],
                        wrapper_class=structlog.make_filtering_bound_logger(lvl),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))


class Daemon:
    """One running runner."""

    def __init__(self, settings: RunnerSettings, key: RunnerKey) -> None:
        self.settings = settings
        self.key = key
        self.chain = ChainClient(settings.validator_rpc)
        self.metrics = RunnerMetrics()
        self.state_dir = settings.journal_path.parent
        self.chain_id = ""
        self.block_time_s = 1.0
        self.basefees = (0, 0)
        self.params: Mapping[str, Any] = {}
        self.links: list[Link] = []
        self.jobs: JobManager | None = None
        self.health: HealthMonitor | None = None
        self.poller: Poller | None = None
        self.journal: Journal | None = None
        self.last_error = ""
        self.session_problems: tuple[str, ...] = ()
        """Subset validators the runner cannot open a session with (shown by ``status``)."""
        self._snapshot: Snapshot | None = None
        """The validator-set snapshot the session plan is computed from (start-up; then the newest ``/status`` of
        the primary validator: a §5.3 reconfiguration is followed while running)."""
        self._discovered: dict[bytes, tuple[str, int]] = {}
        """QUIC endpoints learned from ``GET /validators`` (both snapshots of a published reconfiguration)."""
        self._primary_status: Mapping[str, Any] | None = None
        """The newest ``/status`` the head loop read from the primary validator (``runner.validator_rpc``)."""
        self.stopping = asyncio.Event()
        self.duties = ChainDuties(self.chain, key, settings.heartbeat, self.metrics)
        """The on-chain heartbeat and the Mode A presence certificate, run at every new head."""
        self._connects_seen = 0
        self._ticked = -1
        self.policy = refusal_policy(settings)
        """What this daemon refuses (its settings at start), for ``status``."""

    # -- start-up -----------------------------------------------------------------------
    async def _bootstrap(self) -> Snapshot:
        s = self.settings
        try:
            status = await self.chain.status()
            self.params = await self.chain.params()
        except NodeUnreachable as e:
            raise StartupError(f"runner.validator_rpc: validator unreachable at {s.validator_rpc}: {e}", 4) from None
        except ApiError as e:
            raise StartupError(f"runner.validator_rpc: {s.validator_rpc} answered {e.code}: {e.message}", 4) from None
        self.chain_id = str(status["chain_id"])
        if s.chain_id is not None and s.chain_id != self.chain_id:
            raise StartupError(f"runner.chain_id: configured {s.chain_id!r} but the validator serves "
                               f"{self.chain_id!r}", 2)
        self._set_basefees(status)
        self._set_block_time(status)
        try:
            return snapshot_from_status(status)
        except SnapshotError as e:
            raise StartupError(f"runner.validator_rpc: bad validator identity from {s.validator_rpc}: {e}", 4) \
                from None

    def _set_block_time(self, status: Mapping[str, Any]) -> None:
        """Follow the validator's block time (it may restart with another one): head polling and the QUIC
        heartbeat cadence (HEARTBEAT_BLOCKS) are both in blocks."""
        block_time_s = max(0.05, int(status.get("block_time_ms", 1000)) / 1000.0)
        if block_time_s == self.block_time_s:
            return
        self.block_time_s = block_time_s
        for link in self.links:
            link.config = dataclasses.replace(link.config, ping_interval_s=self._ping_interval_s())

    def _governed(self, name: str, pinned: int | None, default: int) -> int:
        """A CIP-11 §13 constant: the ``runner.toml`` value when set, else the chain's governed value from the
        last ``GET /params`` (``cip11_params``), else the §13 default."""
        if pinned is not None:
            return pinned
        value = (self.params.get("cip11_params") or {}).get(name, default)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else default

    def _ping_interval_s(self) -> float:
        """HeartbeatPing cadence: every HEARTBEAT_BLOCKS blocks (§6.3; ``heartbeat.quic_interval_blocks`` pins it)."""
        return self.block_time_s * self._governed("HEARTBEAT_BLOCKS", self.settings.heartbeat.quic_interval_blocks, 1)

    def _apply_params(self, params: Mapping[str, Any]) -> None:
        """Take a fresh ``GET /params``: the governed HEARTBEAT_BLOCKS (ping cadence of every session) and
        RESULT_TX_* re-send constants (§10.3) apply from now on, unless ``runner.toml`` pins them."""
        self.params = params
        interval = self._ping_interval_s()
        for link in self.links:
            if link.config.ping_interval_s != interval:
                link.config = dataclasses.replace(link.config, ping_interval_s=interval)
        if self.jobs is not None:
            r = self.settings.results
            self.jobs.grace_blocks = self._governed("RESULT_TX_INCLUSION_GRACE_BLOCKS", r.inclusion_grace_blocks, 2)
            self.jobs.interval_blocks = self._governed("RESULT_TX_REBROADCAST_INTERVAL_BLOCKS",
                                                       r.rebroadcast_interval_blocks, 2)

    def _set_basefees(self, status: Mapping[str, Any]) -> None:
        bf = status.get("basefee") or {}
        self.basefees = (int(bf.get("cycle", 0)), int(bf.get("cell", 0)))

    def fees(self) -> Fees:
        """Fee fields from the latest basefees and the ``[fees]`` policy."""
        f = self.settings.fees
        return Fees.from_basefees(*self.basefees, multiplier=f.max_fee_multiplier,
                                  priority_fee_per_cycle=f.priority_fee_per_cycle,
                                  priority_fee_per_cell=f.priority_fee_per_cell)

    def _on_capacity(self, accepting: bool) -> None:
        for link in self.links:
            link.set_accepting(accepting)

    def _on_health(self, unhealthy: Mapping[str, str]) -> None:
        assert self.jobs is not None and self.health is not None
        for kind in self.health.kinds():
            self.metrics.executor_healthy.labels(kind=kind).set(0 if kind in unhealthy else 1)
        for kind, reason in unhealthy.items():
            log.warning("executor unhealthy; its job kind is not advertised", kind=kind, reason=reason)
        self.jobs.set_unhealthy(unhealthy)

    def _on_kinds(self, unavailable: frozenset[str]) -> None:
        for link in self.links:
            link.set_unavailable(unavailable)

    async def _validators_doc(self) -> Mapping[str, Any] | None:
        """``GET /validators`` of our validator, or None when it cannot be read (discovery is best-effort)."""
        try:
            return await self.chain.validators()
        except Exception as e:  # any failure just leaves runner.toml's endpoints
            log.warning("cannot read GET /validators; using runner.toml endpoints only", error=str(e))
            return None

    async def _plan_links(self, *, fetch: bool = True) -> tuple[str, ...]:
        """Create a :class:`Link` for each member of the plan at the head (``Sub(R)``; §5.3 ``Sub_E ∪ Sub_{E+1}``
        during a reconfiguration window) that has an endpoint and no link yet: endpoints from runner.toml
        ``[validators]``, else those the validators announced (``GET /validators``, read again when ``fetch``).
        Links the plan no longer holds are stopped and dropped (the §5.3 cutoff). Returns the problems of members
        still without an endpoint (also kept in ``session_problems``)."""
        jobs, snapshot = self.jobs, self._snapshot
        assert jobs is not None and snapshot is not None
        if fetch:
            doc = await self._validators_doc()
            rc = (doc or {}).get("reconfiguration") or {}
            entries = [*((doc or {}).get("validators") or []),
                       *(((rc.get("old") or {}).get("validators") or []) if isinstance(rc, dict) else []),
                       *(((rc.get("new") or {}).get("validators") or []) if isinstance(rc, dict) else [])]
            discovered, bad = discovered_endpoints({"validators": entries})
            self._discovered.update(discovered)
            added = self.chain.add_fallbacks(discovered_rpc_urls(doc))
            if added:
                log.info("validator RPC fallbacks learned", added=added)
            for problem in bad:
                log.warning("ignoring a discovered validator endpoint", problem=problem)
        targets, missing = self._plan_at_head()
        for lk in stale_links(self.links, targets, snapshot):
            log.info("closing a session the plan no longer holds", validator=(lk.config.expected_validator or
                     b"").hex()[:16], subset_epoch=lk.config.subset_epoch, head=jobs.head)
            lk.stop()
            self.links.remove(lk)
        have = {link_key(lk) for lk in self.links}
        for target in targets:
            epoch = target.snapshot or snapshot.epoch_snapshot()  # §5.3: the epoch this session offers
            if (target.validator, epoch.epoch) in have:
                continue
            cfg = LinkConfig(host=target.host, port=target.port, chain_id=self.chain_id,
                             validator_set=epoch.validators, expected_validator=target.validator,
                             subset_epoch=epoch.epoch,
                             ping_interval_s=self._ping_interval_s())
            link = EpochLink(SessionKey(self.key.private_key), cfg, height=lambda: jobs.head,
                             on_assignment=self._on_assignment, on_cancel=self._on_cancel,
                             on_receipt=self.duties.presence.add)
            key = (target.validator, epoch.epoch)
            link.still_planned = lambda key=key: key in self._planned_now()
            link.unavailable = jobs.unavailable_kinds()
            self.links.append(link)
        self.session_problems = missing
        return missing

    def _plan_at_head(self) -> tuple[tuple[SessionTarget, ...], tuple[str, ...]]:
        """:func:`plan_sessions` at the current head with the governed subset bounds and the known endpoints."""
        jobs, snapshot, s = self.jobs, self._snapshot, self.settings
        assert jobs is not None and snapshot is not None
        cip11 = self.params.get("cip11_params") or {}
        return plan_sessions(self.key.public_key, snapshot, s.quic_endpoint,
                             {**self._discovered, **s.validator_endpoints}, height=jobs.head,
                             min_subset=int(cip11.get("MIN_SUBSET", MIN_SUBSET)),
                             max_subset=int(cip11.get("MAX_SUBSET", MAX_SUBSET)))

    def _planned_now(self) -> set[tuple[bytes | None, int]]:
        """The ``(validator, epoch)`` keys the plan holds at the current head (what a link asks before it
        reconnects: :attr:`EpochLink.still_planned`)."""
        if self.jobs is None or self._snapshot is None:
            return set()
        return planned_keys(self._plan_at_head()[0], self._snapshot)

    def _note_status(self, status: Mapping[str, Any]) -> None:
        """Keep the head loop's ``/status`` when it came from the primary validator (a failed-over read names
        another validator, whose key is not the one the plan's RPC endpoint reaches)."""
        snap = self._snapshot
        me = (status.get("validator") or {}).get("ed25519_public_key")
        if snap is not None and me == "0x" + snap.rpc_validator.hex():
            self._primary_status = status

    def _follow_snapshot(self) -> bool:
        """Take the snapshot of the newest primary ``/status`` when it differs (§5.3: a ``ValidatorSetActivated``
        published while running); True if it changed. A malformed one is logged and ignored."""
        status = self._primary_status
        if status is None:
            return False
        try:
            snap = snapshot_from_status(status)
        except SnapshotError as e:
            log.warning("ignoring the validator set in /status", error=str(e))
            return False
        if snap == self._snapshot:
            return False
        log.info("validator set changed", subset_epoch=snap.subset_epoch, reconfiguration=None
                 if snap.reconfiguration is None else {"epoch": snap.reconfiguration.new.epoch,
                                                       "activation_height": snap.reconfiguration.activation_height,
                                                       "overlap_blocks": snap.overlap_blocks})
        self._snapshot = snap
        return True

    async def _discover_loop(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Keep the sessions on plan while running: at each new head (and on a new snapshot in ``/status``, §5.3)
        re-plan — open the sessions a reconfiguration adds, close those past the cutoff; while a subset member has
        no endpoint, ask ``GET /validators`` again every DISCOVERY_INTERVAL_S (the validators announce their
        endpoints to each other within seconds of starting)."""
        loop = asyncio.get_running_loop()
        jobs = self.jobs
        assert jobs is not None
        planned_at, fetched_at = jobs.head, loop.time()
        while True:
            await asyncio.sleep(min(DISCOVERY_INTERVAL_S, self.block_time_s / 2))
            changed = self._follow_snapshot()
            fetch = changed or (bool(self.session_problems) and loop.time() - fetched_at >= DISCOVERY_INTERVAL_S)
            if not (fetch or changed or jobs.head != planned_at):
                continue
            planned_at = jobs.head
            if fetch:
                fetched_at = loop.time()
            before = set(map(id, self.links))
            try:
                await self._plan_links(fetch=fetch)
            except Exception as e:  # a bad plan must not end the loop; the next head tries again
                log.error("session planning failed", error=repr(e))
                continue
            for lk in self.links:
                if id(lk) in before:
                    continue
                log.info("session planned", validator=lk.config.expected_validator.hex()[:16]
                         if lk.config.expected_validator else None, subset_epoch=lk.config.subset_epoch,
                         endpoint=f"{lk.config.host}:{lk.config.port}")
                tasks.append(loop.create_task(lk.run()))

    async def _bootstrap_until_reachable(self) -> Snapshot:
        """:meth:`_bootstrap`, retried with the §11.3 backoff while the validator is unreachable or refuses: the
        daemon stays up and says why in its log (the operator may start it before the validator)."""
        rng = random.Random()
        attempt = 0
        while True:
            try:
                return await self._bootstrap()
            except StartupError as e:
                if e.exit_code != 4:
                    raise
                self.last_error = str(e)
                delay = backoff_delay(attempt, rng)
                log.error("validator not reachable yet; retrying", error=str(e), retry_in_s=round(delay, 2),
                          attempt=attempt + 1)
                attempt += 1
            try:
                await asyncio.wait_for(self.stopping.wait(), delay)
            except TimeoutError:
                continue
            raise StartupError(f"stopped before the validator was reachable ({self.last_error})", 4)

    # -- main ---------------------------------------------------------------------------
    async def run(self) -> int:
        """Run until stopped or drained; returns the exit code."""
        s = self.settings
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
        loop.add_signal_handler(signal.SIGINT, self.stopping.set)
        try:  # executor settings that need the environment or files (an LLM key, bwrap) fail before anything starts
            executors = ExecutorRegistry(executors_config(s), llm_observer=self.metrics)
            warning = check_isolation(executors.config)
        except ConfigError as e:
            raise StartupError(str(e), 2) from None
        except ValueError as e:  # a job kind served twice (section, adapter, plugin), a plugin's factory failing
            raise StartupError(f"runner.toml: executors: {e}", 2) from None
        if warning is not None:
            log.warning(warning)
        write_pid(self.state_dir)
        status_task = loop.create_task(self._status_loop())  # `status` works while the validator is unreachable
        try:
            snapshot = await self._bootstrap_until_reachable()
        except BaseException:
            status_task.cancel()
            remove_pid(self.state_dir)
            raise
        self.journal = Journal(s.journal_path)
        limits = self.params.get("limits", {})
        self.jobs = JobManager(key=self.key, chain_id=self.chain_id, chain=self.chain, journal=self.journal,
                               executors=executors,
                               max_concurrent=s.capabilities.max_concurrent_jobs, fees=self.fees,
                               grace_blocks=self._governed("RESULT_TX_INCLUSION_GRACE_BLOCKS",
                                                           s.results.inclusion_grace_blocks, 2),
                               interval_blocks=self._governed("RESULT_TX_REBROADCAST_INTERVAL_BLOCKS",
                                                              s.results.rebroadcast_interval_blocks, 2),
                               metrics=self.metrics,
                               on_capacity=self._on_capacity, max_tx_bytes=limits.get("max_tx_bytes"),
                               kind_limits=kind_limits(s), on_kinds=self._on_kinds)
        self.health = HealthMonitor(executors.config)
        await self.health.check()  # before any session: an unhealthy kind is never advertised
        self._on_health(self.health.unhealthy())
        self.health.on_change = self._on_health
        if s.metrics_addr is not None:
            try:
                self.metrics.serve(*s.metrics_addr)
            except OSError as e:
                raise StartupError(f"metrics.addr: cannot listen on {s.metrics_addr[0]}:{s.metrics_addr[1]}: {e}",
                                   2) from None
        jobs = self.jobs
        jobs.head = await self.chain.height()
        resumed = await jobs.resume()
        self._snapshot = snapshot
        missing = await self._plan_links()
        log.info("runner started", address=self.key.checksum_address, chain_id=self.chain_id, head=jobs.head,
                 resumed=resumed, validators=len(snapshot.validators),
                 subset=[lk.config.expected_validator.hex()[:16] for lk in self.links
                         if lk.config.expected_validator is not None])
        for problem in missing:
            log.error("no session with a subset validator", problem=problem)
        self.poller = Poller(self.chain, jobs, self.key.address, s.poll_interval_s,
                             sessions_up=lambda: any(lk.authenticated.is_set() for lk in self.links),
                             metrics=self.metrics)
        loop.add_signal_handler(signal.SIGUSR1, self.drain)
        tasks = [loop.create_task(lk.run()) for lk in self.links]
        tasks += [loop.create_task(self._head_loop()), loop.create_task(self.poller.run()), status_task,
                  loop.create_task(self.health.run(s.executors.health_interval_s)),
                  loop.create_task(self._discover_loop(tasks))]
        try:
            await self.stopping.wait()
        finally:
            for lk in self.links:
                lk.stop()
            await asyncio.sleep(0.2)  # let the Goodbye leave
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for t in list(jobs.tasks.values()):
                t.cancel()
            await asyncio.gather(*jobs.tasks.values(), return_exceptions=True)
            await executors.aclose()  # MCP stdio server processes
            self._write_status()
            self.journal.close()
            remove_pid(self.state_dir)
            log.info("runner stopped")
        return 0

    def drain(self) -> None:
        """Stop taking new work; exit once in-flight executions have produced their result transactions."""
        if self.jobs is None or self.jobs.draining:
            return
        log.info("draining: no new assignments; finishing in-flight jobs", in_flight=self.jobs.in_flight)
        self.jobs.draining = True
        self._on_capacity(False)

    def _on_cancel(self, job_id: bytes) -> None:
        assert self.jobs is not None
        self.jobs.cancel(job_id)

    async def _on_assignment(self, link: Link, frame: JobAssignment) -> None:
        assert self.jobs is not None
        await self.jobs.on_push(link, frame)

    async def _head_loop(self) -> None:
        assert self.jobs is not None and self.journal is not None
        jobs = self.jobs
        while True:
            try:
                status = await self.chain.head_status()  # fails over: the head must advance with our validator down
                self._note_status(status)
                self._set_basefees(status)
                self._set_block_time(status)
                height = int(status["height"])
                if height > self._ticked:
                    self._ticked = height
                    self.last_error = ""  # cleared per new head; what this round finds wrong is set again below
                    self._apply_params(await self.chain.params())  # governed constants at the new head
                    await jobs.tick(height)
                    problem = await self.duties.heartbeat(height, chain_id=self.chain_id, params=self.params,
                                                          fees=self.fees(), draining=jobs.draining)
                    if problem is not None:
                        self.last_error = problem
                    await self.duties.presence_certificate(height, chain_id=self.chain_id, params=self.params,
                                                           fees=self.fees(), links=self.links)
            except (ApiError, NodeUnreachable) as e:
                self.last_error = f"validator API: {e}"
                log.warning("validator API error", error=str(e))
            except Exception as e:  # keep the daemon up; the journal keeps every obligation
                self.last_error = f"internal: {e!r}"
                log.error("head loop error", error=repr(e))
            if jobs.draining and not jobs.tasks and not any(ob.state == "executed" for ob in self.journal.pending()):
                log.info("drained")
                self.stopping.set()
                return
            await asyncio.sleep(self.block_time_s / 2)

    async def _status_loop(self) -> None:
        while True:
            self._write_status()
            await asyncio.sleep(1.0)

    def _write_status(self) -> None:
        jobs, journal = self.jobs, self.journal
        doc: dict[str, Any] = {"pid": os.getpid(), "updated_at": time.time(),
                               "address": to_checksum_address(self.key.address), "chain_id": self.chain_id,
                               "last_error": self.last_error, "policy": self.policy,
                               "chain_capabilities": self.duties.chain_capabilities}
        if jobs is None or journal is None:  # still starting (validator unreachable): say why
            doc.update(starting=True, sessions=[], jobs_in_flight=[], pending_obligations=None, last_results=[])
            with contextlib.suppress(OSError):
                write_status(self.state_dir, doc)
            return
        connects = sum(lk.connects for lk in self.links)
        if connects > self._connects_seen:
            self.metrics.reconnects.inc(connects - self._connects_seen)
            self._connects_seen = connects
        self.metrics.sessions_up.set(sum(1 for lk in self.links if lk.authenticated.is_set()))
        try:
            pending = journal.pending()
            recent = journal.recent(10)
        except Exception:  # journal closed at shutdown
            return
        doc.update(running_status(jobs, self.links, self.session_problems, self.poller, pending, recent))
        with contextlib.suppress(OSError):
            write_status(self.state_dir, doc)
