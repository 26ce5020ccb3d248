"""The per-view stage timeline (``cowboy_node/consensus/timeline.py``): steps between consecutive stages present,
per role; first marks win; views left without a committed block are dropped."""

from __future__ import annotations

from cowboy_node.consensus.timeline import ViewTimeline


def test_steps_are_between_consecutive_present_stages_per_role() -> None:
    t = ViewTimeline()
    t.mark(5, "seen", 1.000, leader=False)
    t.mark(5, "body", 1.010)
    t.mark(5, "body", 1.500)  # a later mark of a stage is ignored
    t.mark(5, "exec_start", 1.020)
    t.mark(5, "exec_end", 1.120)
    t.mark(5, "finalized", 1.300)
    t.mark(5, "committed", 1.350)
    t.mark(6, "seen", 2.0, leader=True)
    t.mark(6, "committed", 2.4)
    t.mark(4, "seen", 0.5)  # a lower view never committed: dropped when 5 closes
    assert t.close(5) is not None and t.close(6) is not None
    assert t.close(4) is None
    s = t.summary(recent=1)
    fol = s["follower"]
    assert isinstance(fol, dict)
    assert fol["views"] == 1
    assert fol["seen->body"] == {"p50_ms": 10.0, "p99_ms": 10.0}
    assert fol["exec_start->exec_end"] == {"p50_ms": 100.0, "p99_ms": 100.0}
    assert fol["exec_end->finalized"] == {"p50_ms": 180.0, "p99_ms": 180.0}
    assert fol["seen->finalized"] == {"p50_ms": 300.0, "p99_ms": 300.0}
    assert fol["seen->committed"] == {"p50_ms": 350.0, "p99_ms": 350.0}
    lead = s["leader"]
    assert isinstance(lead, dict)
    assert lead["views"] == 1 and lead["seen->committed"] == {"p50_ms": 400.0, "p99_ms": 400.0}
    assert s["recent"] == [{"view": 6, "leader": True, "ms": {"seen": 2000.0, "committed": 2400.0}}]
