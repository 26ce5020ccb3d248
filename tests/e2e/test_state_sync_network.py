"""State sync in a real 4-validator network (issue 34 §1): the validators take snapshots every 5 blocks; one is
stopped, its data directory wiped, and restarted with ``[snapshot] state_sync``: it installs the others' newest
snapshot (its earliest retained height is that snapshot's), block-syncs from there, does not vote until the
double-sign guard's watch is over, then votes, and agrees with the others."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import BLOCK_TIME_MS, FORM_TIMEOUT_S, LOG_LINES
from tests.e2e.netproc import Testnet

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def snapshotting(tmp_path: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path, n=4, block_time_ms=BLOCK_TIME_MS, proxied=False)
    for v in net.validators:
        conf = v.home / "config.toml"
        conf.write_text(conf.read_text().replace("interval_blocks = 0", "interval_blocks = 5"))
    try:
        try:
            net.start()
            net.wait_heights(2, FORM_TIMEOUT_S)
        except BaseException:
            print(net.logs(LOG_LINES))
            raise
        yield net
    finally:
        net.close()


def test_a_wiped_validator_joins_from_a_snapshot(snapshotting: Testnet) -> None:
    net, victim = snapshotting, 3
    net.wait_heights(12, timeout=60)
    assert net.stop(victim) == 0
    net.wipe(victim)
    conf = net.validators[victim].home / "config.toml"
    conf.write_text(conf.read_text().replace("# state_sync = false", "state_sync = true"))
    others = net.others(victim)
    net.start(victim)
    status = net.status(victim)
    earliest = status["storage"]["earliest_retained_height"]
    assert earliest >= 10 and earliest % 5 == 0, status["storage"]  # installed a snapshot, not replayed genesis
    log = net.validators[victim].log_path.read_text(errors="replace")
    assert "state sync: installed" in log
    code, _ = net.get(victim, "/block/1")
    assert code == 410  # below the snapshot: nothing stored
    deadline = time.monotonic() + 90
    while not net.status(victim)["consensus"]["voting"]["enabled"]:
        assert time.monotonic() < deadline, net.status(victim)["consensus"]["voting"]
        time.sleep(0.2)
    top = max(h for h in net.heights(others).values() if h is not None) + 2
    net.wait_heights(top, timeout=60)
    net.assert_agreement(top, from_height=earliest)
