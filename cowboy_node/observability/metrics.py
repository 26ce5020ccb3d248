"""Prometheus metrics of the node and the ``/metrics`` HTTP endpoint.

Every metric lives on the :class:`NodeMetrics` instance's own registry (not the
process-global default one), under the ``cowboy`` namespace, so that several
nodes in one test process never collide and nothing else leaks into the output.

Label values must stay low-cardinality: ``route`` is the route *template*
(``/block/{height}``, not ``/block/17``), ``code`` is an error code.
"""

from __future__ import annotations

import ipaddress
from importlib import metadata

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import choose_encoder

NAMESPACE = "cowboy"

BLOCK_INTERVAL_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
"""Seconds between consecutive commits; centred on the default 1 s block time."""
TXS_PER_BLOCK_BUCKETS = (0, 1, 10, 100, 500, 1000, 2000, 5000, 10000)
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Seconds spent building/executing or committing one block (well under the block time when healthy)."""


def _version() -> str:
    try:
        return metadata.version("cowboy-node")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "unknown"


class NodeMetrics:
    """Prometheus metrics of the node (namespace ``cowboy``), on their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry: CollectorRegistry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        ns = NAMESPACE
        self.build_info = Info("build", "Version of the running cowboy-node.", namespace=ns, registry=r)
        self.build_info.info({"version": _version()})
        self.height = Gauge("height", "Height of the last committed block.", namespace=ns, registry=r)
        self.block_interval = Histogram(
            "block_interval_seconds", "Wall-clock time between two consecutive block commits.",
            namespace=ns, registry=r, buckets=BLOCK_INTERVAL_BUCKETS)
        self.txs_per_block = Histogram(
            "txs_per_block", "Transactions included per committed block.",
            namespace=ns, registry=r, buckets=TXS_PER_BLOCK_BUCKETS)
        self.mempool_size = Gauge("mempool_txs", "Transactions held in the mempool.", namespace=ns, registry=r)
        self.mempool_bytes = Gauge("mempool_bytes", "Encoded bytes held in the mempool.", namespace=ns, registry=r)
        self.commit_duration = Histogram(
            "block_commit_duration_seconds", "Time to write one block (synced LevelDB batch).",
            namespace=ns, registry=r, buckets=DURATION_BUCKETS)
        self.execution_duration = Histogram(
            "block_execution_duration_seconds", "Time to build and execute one block, end-of-block included.",
            namespace=ns, registry=r, buckets=DURATION_BUCKETS)
        self.basefee = Gauge("basefee", "Basefee of the last committed block, per metered resource.",
                             ["resource"], namespace=ns, registry=r)
        self.txs_rejected = Counter("txs_rejected", "Transactions refused at admission, by error code.",
                                    ["code"], namespace=ns, registry=r)
        self.rpc_requests = Counter("rpc_requests", "HTTP API requests, by route template and status code.",
                                    ["route", "status"], namespace=ns, registry=r)

    def observe_block(self, *, height: int, interval_s: float | None, tx_count: int, commit_s: float,
                      execution_s: float, basefee_cycles: int, basefee_cells: int) -> None:
        """Record one committed block. ``interval_s`` is None for the first block after start-up."""
        self.height.set(height)
        if interval_s is not None:
            self.block_interval.observe(interval_s)
        self.txs_per_block.observe(tx_count)
        self.commit_duration.observe(commit_s)
        self.execution_duration.observe(execution_s)
        self.basefee.labels(resource="cycles").set(basefee_cycles)
        self.basefee.labels(resource="cells").set(basefee_cells)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The registry rendered for an HTTP ``Accept`` header: (body, content type)."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


async def start_metrics_server(metrics: NodeMetrics, host: str, port: int) -> web.AppRunner:
    """Serve ``GET /metrics`` on ``host:port``; returns the started runner (the caller must ``cleanup()`` it).

    Raises ``OSError`` if the address cannot be bound (nothing is left running then).
    """

    async def handle_metrics(request: web.Request) -> web.Response:
        body, content_type = metrics.exposition(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def handle_index(request: web.Request) -> web.Response:
        return web.Response(text="cowboy-node metrics: see /metrics\n")

    app = web.Application()
    app.router.add_get("/metrics", handle_metrics)
    app.router.add_get("/", handle_index)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


def parse_host_port(text: str, *, key: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` or ``[IPV6]:PORT`` (port 0-65535) into ``(host, port)``.

    The brackets are removed from an IPv6 host. Raises ``ValueError`` naming ``key``.
    """
    expected = "expected HOST:PORT or [IPV6]:PORT with a port in 0-65535 (e.g. 127.0.0.1:4000)"
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise ValueError(f"{key}: {expected}, got {text!r}")
    if host.startswith("[") or host.endswith("]"):
        inner = host[1:-1] if host.startswith("[") and host.endswith("]") else ""
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise ValueError(f"{key}: {expected}; {host!r} is not a bracketed IPv6 address") from None
        return inner, int(port_text)
    if ":" in host:
        raise ValueError(f"{key}: {expected}; an IPv6 host must be in brackets, got {text!r}")
    if any(c.isspace() or c in "/?#@[]" for c in host):
        raise ValueError(f"{key}: {expected}; {host!r} is not a host name or address")
    return host, int(port_text)


__all__ = [
    "NAMESPACE",
    "NodeMetrics",
    "parse_host_port",
    "start_metrics_server",
]
