"""Metrics (Prometheus, namespace ``cowboy``) and structured logging of the node."""

from cowboy_node.observability.logging import configure_logging, get_logger, reset_logging
from cowboy_node.observability.metrics import NodeMetrics, StepTimer, start_metrics_server

__all__ = [
    "NodeMetrics",
    "StepTimer",
    "configure_logging",
    "get_logger",
    "reset_logging",
    "start_metrics_server",
]
