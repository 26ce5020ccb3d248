"""The figure helpers of ``bench/runner_capacity_chain.py``: block interval statistics and the push-latency window
of the node's Prometheus histogram (expected values worked out by hand)."""

from __future__ import annotations

from bench.runner_capacity_chain import histogram_window, interval_stats, parse_push_histogram

EXPOSITION_BEFORE = """# HELP cowboy_push_latency_seconds Assignment block commit to the runner's JobAck{Accepted}.
# TYPE cowboy_push_latency_seconds histogram
cowboy_push_latency_seconds_bucket{le="0.005"} 1.0
cowboy_push_latency_seconds_bucket{le="0.01"} 2.0
cowboy_push_latency_seconds_bucket{le="0.025"} 2.0
cowboy_push_latency_seconds_bucket{le="+Inf"} 2.0
cowboy_push_latency_seconds_count 2.0
cowboy_push_latency_seconds_sum 0.011
cowboy_block_interval_seconds_bucket{le="0.1"} 7.0
"""
EXPOSITION_AFTER = """cowboy_push_latency_seconds_bucket{le="0.005"} 1.0
cowboy_push_latency_seconds_bucket{le="0.01"} 52.0
cowboy_push_latency_seconds_bucket{le="0.025"} 100.0
cowboy_push_latency_seconds_bucket{le="+Inf"} 102.0
cowboy_push_latency_seconds_count 102.0
cowboy_push_latency_seconds_sum 1.611
"""


def test_parse_reads_only_the_push_histogram() -> None:
    h = parse_push_histogram(EXPOSITION_BEFORE)
    assert h == {"buckets": {"0.005": 1.0, "0.01": 2.0, "0.025": 2.0, "+Inf": 2.0}, "sum": 0.011, "count": 2.0}
    assert parse_push_histogram("") == {"buckets": {}, "sum": 0.0, "count": 0.0}


def test_window_counts_only_what_happened_between_the_scrapes() -> None:
    w = histogram_window(parse_push_histogram(EXPOSITION_BEFORE), parse_push_histogram(EXPOSITION_AFTER))
    # 100 pushes in the window: 50 in (5, 10] ms, 48 in (10, 25] ms, 2 above 25 ms; sum 1.6 s -> mean 16 ms.
    # p50 = the 50th: in the (5, 10] bucket; p99 = the 99th: above 25 ms, past the last finite bound (None).
    assert w == {"count": 100, "mean_ms": 16.0, "p50_le_ms": 10.0, "p99_le_ms": None}
    same = parse_push_histogram(EXPOSITION_AFTER)
    assert histogram_window(same, same)["count"] == 0


def test_interval_stats_from_header_timestamps() -> None:
    ts = [0, 1000, 2000, 3010, 4010, 5250]  # gaps 1000, 1000, 1010, 1000, 1240
    iv = interval_stats(ts, 1000)
    assert iv == {"blocks": 5, "p50_ms": 1000, "p99_ms": 1240, "max_ms": 1240, "p99_over_target": 1.24,
                  "met": False}
    assert interval_stats(ts[:5], 1000)["met"] is True  # p99 1010 ms <= 1.2 x 1000
    assert interval_stats([5], 1000) == {"blocks": 0, "p50_ms": None, "p99_ms": None, "max_ms": None,
                                         "p99_over_target": None, "met": False}
