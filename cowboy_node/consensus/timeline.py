"""Where a view's proposal→finalization time goes, on one validator: timestamps of its stages, per view.

The consensus service marks each stage the first time it happens in a view (monotonic seconds); when the view's
block is committed (or the view is left without one) the record is closed and kept in a bounded ring. The
summary (``/status`` ``consensus.timeline``) gives, per role (``leader``: this validator built the block;
``follower``: it verified it), the p50/p99 in milliseconds of the time between consecutive stages present in a
record. It is an observation aid: nothing in consensus reads it.

Stages, in order (a record holds the ones that happened):

- ``seen``: leader — the build was asked for (after the cadence wait); follower — the leader's proposal vote
  (its ``notarize``) arrived;
- ``body``: follower — the block body is here;
- ``exec_start`` / ``exec_end``: the build or verification started / ended in the builder thread (the time
  from the previous stage to ``exec_start`` is the wait for the builder thread and the state lock);
- ``voted``: this validator's ``notarize`` was journaled (fsync) and broadcast;
- ``notarized``: a notarization of the view was assembled or received;
- ``finalized``: the engine reported the block finalized;
- ``commit_start`` / ``committed``: the commit started in the builder thread / the block was committed and
  handed to the node (mempool, pushes).

Records also hold ``notarize<i>`` / ``finalize<i>``: when validator ``i``'s vote of that kind arrived. The
monotonic clock is the host's, so records of validators on one host line up (``recent`` in the summary).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field

__all__ = ["STAGES", "ViewRecord", "ViewTimeline"]

STAGES = ("seen", "body", "exec_start", "exec_end", "voted", "notarized", "finalized", "commit_start", "committed")
"""The stages of a view, in the order they normally happen."""


@dataclass(slots=True)
class ViewRecord:
    """The stage times (monotonic seconds) of one view on this validator."""

    view: int
    """The consensus view."""
    leader: bool = False
    """Whether this validator built the view's block."""
    times: dict[str, float] = field(default_factory=dict)
    """Stage → first time it happened."""


class ViewTimeline:
    """Open records by view, and a ring of the last ``keep`` closed ones; see the module docstring."""

    def __init__(self, keep: int = 256) -> None:
        self._open: dict[int, ViewRecord] = {}
        self.closed: collections.deque[ViewRecord] = collections.deque(maxlen=keep)
        """The newest closed records (oldest first)."""

    def mark(self, view: int, stage: str, t: float, *, leader: bool | None = None) -> None:
        """Stage ``stage`` of ``view`` happened at ``t`` (ignored if already marked)."""
        rec = self._open.get(view)
        if rec is None:
            if len(self._open) >= 1024:  # views that never closed (left without a block, crashes): bound them
                self._open.pop(min(self._open))
            rec = self._open[view] = ViewRecord(view)
        if leader is not None:
            rec.leader = leader
        rec.times.setdefault(stage, t)

    def close(self, view: int) -> ViewRecord | None:
        """Move ``view``'s record to the ring (its block was committed); records of lower views still open are
        dropped (nullified views, or blocks committed by sync)."""
        for old in [w for w in self._open if w < view]:
            del self._open[old]
        rec = self._open.pop(view, None)
        if rec is not None:
            self.closed.append(rec)
        return rec

    def summary(self, recent: int = 0) -> dict[str, object]:
        """Per role, p50/p99 (ms) of each step between consecutive stages present, over the closed records;
        with ``recent``, the newest that many records too (stage → monotonic ms)."""
        out: dict[str, object] = {}
        if recent:
            out["recent"] = [{"view": r.view, "leader": r.leader,
                              "ms": {k: round(1000 * t, 2) for k, t in r.times.items()}}
                             for r in list(self.closed)[-recent:]]
        for role in ("leader", "follower"):
            steps: dict[str, list[float]] = {}
            recs = [r for r in self.closed if r.leader == (role == "leader")]
            for r in recs:
                present = [s for s in STAGES if s in r.times]
                for a, b in itertools.pairwise(present):
                    steps.setdefault(f"{a}->{b}", []).append(r.times[b] - r.times[a])
                if "seen" in r.times and "finalized" in r.times:
                    steps.setdefault("seen->finalized", []).append(r.times["finalized"] - r.times["seen"])
                if "seen" in r.times and "committed" in r.times:
                    steps.setdefault("seen->committed", []).append(r.times["committed"] - r.times["seen"])
            out[role] = {"views": len(recs),
                         **{k: {"p50_ms": _pct_ms(v, 50), "p99_ms": _pct_ms(v, 99)} for k, v in steps.items()}}
        return out


def _pct_ms(values: list[float], p: int) -> float:
    s = sorted(values)
    return round(1000 * s[min(len(s) - 1, (len(s) * p) // 100)], 2)
