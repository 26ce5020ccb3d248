"""The automatic fall-back to state sync in a real 4-validator network (issue 34 §2): the validators keep only the
last 100 blocks (``[storage] retain_blocks``) and take snapshots every 5 blocks; one is stopped, its data directory
wiped, and restarted with the default configuration (no ``[snapshot] state_sync``): it starts from genesis, block
sync asks for height 1, every peer answers ``SyncPruned``, and the node — without operator action — logs why,
restarts into a state sync, installs the others' newest snapshot, block-syncs from its height, waits out the
double-sign guard's watch, votes, and agrees with the others."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from cowboy_node.consensus.service.bodies import BODY_CACHE
from tests.e2e.conftest import BLOCK_TIME_MS, FORM_TIMEOUT_S, LOG_LINES
from tests.e2e.netproc import RpcUnavailable, Testnet

pytestmark = pytest.mark.timeout(900)
RESTART_BOUND_S = 300
"""Bounds on eventual states (the restart into the install, the guard's watch), sized for a host at load 15."""


INSTALLED = re.compile(r"fall-back to state sync: installed.*?\bheight=(\d+)")
"""The node's log line of a finished fall-back install, with the snapshot's height."""


def _earliest(net: Testnet, i: int) -> int | None:
    """Validator ``i``'s earliest retained height (None while it does not answer or has none yet)."""
    with contextlib.suppress(RpcUnavailable, AssertionError):  # restarting
        return int(net.status(i)["storage"]["earliest_retained_height"]) or None
    return None


@pytest.fixture
def pruning(tmp_path: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path, n=4, block_time_ms=BLOCK_TIME_MS // 2, proxied=False)  # 100+ blocks to prune
    for v in net.validators:
        conf = v.home / "config.toml"
        text = conf.read_text().replace("interval_blocks = 0", "interval_blocks = 5")
        conf.write_text(text.replace("retain_blocks = 0", "retain_blocks = 100"))
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


def test_a_wiped_validator_whose_peers_pruned_falls_back_to_state_sync_by_itself(pruning: Testnet) -> None:
    net, victim = pruning, 3
    # Heights 1..3 and more are pruned everywhere (retain_blocks = 100), and block 1's body has left every peer's
    # body cache (the newest BODY_CACHE bodies, served by hash to a node fetching parents): with it still cached
    # the wiped node can fetch the parents back to genesis by hash, catch up, and never need the fall-back.
    net.wait_heights(BODY_CACHE + 110, timeout=600)
    assert net.stop(victim) == 0
    net.wipe(victim)
    conf = (net.validators[victim].home / "config.toml").read_text()
    assert "# state_sync = false" in conf and "# auto_state_sync = true" in conf  # defaults: no operator action
    others = net.others(victim)
    assert all(net.status(i)["storage"]["earliest_retained_height"] > 1 for i in others)
    net.start(victim)
    log_path = net.validators[victim].log_path
    deadline = time.monotonic() + RESTART_BOUND_S
    installed = None
    while installed is None:  # it first starts from genesis, then restarts itself into the state sync
        assert time.monotonic() < deadline, net.logs(LOG_LINES)
        installed = INSTALLED.search(log_path.read_text(errors="replace"))
        time.sleep(0.2)
    snapshot = int(installed.group(1))
    log = log_path.read_text(errors="replace")
    assert "falling back to state sync" in log and "pruned" in log
    # A snapshot the others took (every 5 blocks at least: under load one may come later than a multiple of 5,
    # snapshotter.py), not a replay from genesis.
    assert snapshot > 1 and any(re.search(rf"\bheight={snapshot}\b", line) for i in others
                                for line in net.validators[i].log_path.read_text(errors="replace").splitlines()
                                if "snapshot taken" in line), snapshot
    # It keeps 100 blocks too, so its earliest height moves up once it has synced 100 past the snapshot (read
    # from the log above, not raced here): never below the snapshot, whose earlier blocks it never had.
    earliest = net.wait_for("the restarted node's /status", partial(_earliest, net, victim), RESTART_BOUND_S)
    assert earliest >= snapshot
    assert not (net.validators[victim].data_dir.parent / "data.statesync-requested").exists()
    deadline = time.monotonic() + RESTART_BOUND_S
    while not net.status(victim)["consensus"]["voting"]["enabled"]:  # the double-sign guard watched first
        assert time.monotonic() < deadline, net.status(victim)["consensus"]["voting"]
        time.sleep(0.2)
    top = max(h for h in net.heights(others).values() if h is not None) + 2
    net.wait_heights(top, timeout=RESTART_BOUND_S)
    net.assert_agreement(top, from_height=_earliest(net, victim) or top)
