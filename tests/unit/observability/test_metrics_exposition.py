"""The node's metric names, types, help texts, labels and buckets, pinned (issue 32: ``NodeMetrics`` as a table).

``golden/node_metrics_exposition.txt`` is a fresh registry's exposition with sample values dropped, taken from the
constructor before it became :data:`~cowboy_node.observability.metrics.METRICS`. Dashboards, alerts and
``docs/`` name these metrics: a change here is a change to operators. To add a metric on purpose, regenerate it::

    .venv/bin/python -c 'from tests.unit.observability.test_metrics_exposition import shape; print(shape())' \
        > tests/unit/observability/golden/node_metrics_exposition.txt
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from cowboy_node.observability.metrics import METRICS, NodeMetrics

GOLDEN = Path(__file__).resolve().parent / "golden" / "node_metrics_exposition.txt"


def shape() -> str:
    """A fresh registry's text exposition, each labelled metric given one child (labels ``"_"``) so that its label
    names and buckets show: every ``# HELP``/``# TYPE`` line, each sample's name and labels."""
    metrics = NodeMetrics()
    for collector in list(metrics.registry._collector_to_names):  # prometheus_client has no public iterator
        names = getattr(collector, "_labelnames", ())
        if names and collector is not metrics.build_info:
            collector.labels(*("_" for _ in names))
    body, _ = metrics.exposition()
    lines = []
    for line in body.decode().splitlines():
        if not line.startswith("#"):
            line = re.sub(r"\s+\S+$", "", line)  # the value (``_created`` ones are timestamps)
        lines.append(re.sub(r'^cowboy_build_info\{version="[^"]*"\}', 'cowboy_build_info{version="<version>"}', line))
    return "\n".join(lines) + "\n"


def test_the_exposition_has_the_pinned_names_types_help_labels_and_buckets() -> None:
    assert shape() == GOLDEN.read_text(encoding="utf-8")


def test_every_row_is_the_attribute_its_annotation_declares() -> None:
    metrics = NodeMetrics()
    hints = typing.get_type_hints(NodeMetrics)
    attrs = [spec.attr or spec.name for spec in METRICS]
    assert len(set(attrs)) == len(attrs)
    for spec, attr in zip(METRICS, attrs, strict=True):
        assert type(getattr(metrics, attr)) is spec.kind is hints[attr], attr
    declared = {name for name, hint in hints.items() if hint in (spec.kind for spec in METRICS)}
    assert declared == set(attrs)
