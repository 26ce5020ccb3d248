"""The double-sign guard in a real 4-validator network (issue 30 §1): a validator restarted with a wiped data
directory reports ``consensus.voting`` disabled (``no_vote_journal``) and journals no vote while it watches; once in
sync and ``double_sign_check_views`` views later it votes again (its journal gets records), and the marker is gone."""

from __future__ import annotations

import time

import pytest

from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, marker_path
from tests.e2e.netproc import Testnet

pytestmark = pytest.mark.timeout(600)

WATCH_S = 60.0
"""Generous bound for sync plus the default 10 views (a view lasts about one 300 ms block here)."""


def test_a_wiped_validator_watches_then_votes(testnet: Testnet) -> None:
    net, victim = testnet, 1
    assert net.status(victim)["consensus"]["voting"]["enabled"] is True  # testnet made its (empty) journal
    assert net.stop(victim) == 0
    net.wipe(victim)
    net.start(victim)
    journal = net.validators[victim].data_dir / VOTE_JOURNAL_FILE
    voting = net.status(victim)["consensus"]["voting"]
    assert voting["enabled"] is False and voting["reason"] == "no_vote_journal", voting
    assert marker_path(journal).exists()
    deadline = time.monotonic() + WATCH_S
    while True:  # no vote journaled while the guard says it is not voting (each sample taken in that order)
        size = journal.stat().st_size
        voting = net.status(victim)["consensus"]["voting"]
        if voting["enabled"]:
            break
        assert size == 0, f"journaled a vote while watching: {voting}"
        assert net.validators[victim].running
        assert time.monotonic() < deadline, f"still not voting after {WATCH_S} s: {voting}"
        time.sleep(0.2)
    assert not marker_path(journal).exists()
    net.wait_for("the watched validator journals votes again", lambda: journal.stat().st_size > 0, timeout=30)
    top = max(h for h in net.heights(net.others(victim)).values() if h is not None)
    net.wait_heights(top, timeout=30)
    net.assert_agreement(top)
