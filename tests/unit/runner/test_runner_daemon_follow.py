"""The daemon follows the validator: its block time (the node may restart with another) drives head polling and
the QUIC heartbeat cadence (HEARTBEAT_BLOCKS, §6.3)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_runner.config import parse_settings, render_template
from cowboy_runner.daemon import Daemon
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link, LinkConfig


def _daemon(tmp_path: Path, quic_interval_blocks: int | None) -> Daemon:
    text = render_template("http://127.0.0.1:8545")
    if quic_interval_blocks is not None:
        text = text.replace("# quic_interval_blocks = 1", f"quic_interval_blocks = {quic_interval_blocks}")
    return Daemon(parse_settings(text, tmp_path), RunnerKey.from_private_key(b"\x01" * 32))


async def _noop(link: Link, frame: object) -> None:
    return None


def test_block_time_change_retimes_pings_of_every_session(tmp_path: Path) -> None:
    d = _daemon(tmp_path, quic_interval_blocks=2)
    cfg = LinkConfig(host="127.0.0.1", port=1, chain_id="c", validator_set=(bytes(32),), ping_interval_s=2.0)
    d.links = [Link(SessionKey(d.key.private_key), cfg, height=lambda: 0, on_assignment=_noop) for _ in range(2)]
    d._set_block_time({"block_time_ms": 1000})
    assert d.block_time_s == 1.0
    d._set_block_time({"block_time_ms": 3000})
    assert d.block_time_s == 3.0
    assert [lk.config.ping_interval_s for lk in d.links] == [6.0, 6.0]  # 2 blocks × 3 s
    d._set_block_time({"block_time_ms": 250})
    assert [lk.config.ping_interval_s for lk in d.links] == [0.5, 0.5]


def test_governed_heartbeat_and_result_resend_constants_follow_the_chain(tmp_path: Path) -> None:
    # runner.toml leaves HEARTBEAT_BLOCKS and RESULT_TX_* unset: the values governance set on chain apply, from
    # the next /params read (every new head) on.
    d = _daemon(tmp_path, quic_interval_blocks=None)
    d._set_block_time({"block_time_ms": 1000})
    cfg = LinkConfig(host="127.0.0.1", port=1, chain_id="c", validator_set=(bytes(32),), ping_interval_s=1.0)
    d.links = [Link(SessionKey(d.key.private_key), cfg, height=lambda: 0, on_assignment=_noop)]
    d.jobs = SimpleNamespace(grace_blocks=2, interval_blocks=2)  # type: ignore[assignment]
    d._apply_params({"cip11_params": {"HEARTBEAT_BLOCKS": 1, "RESULT_TX_INCLUSION_GRACE_BLOCKS": 2,
                                      "RESULT_TX_REBROADCAST_INTERVAL_BLOCKS": 2}})
    assert d.links[0].config.ping_interval_s == 1.0 and (d.jobs.grace_blocks, d.jobs.interval_blocks) == (2, 2)
    d._apply_params({"cip11_params": {"HEARTBEAT_BLOCKS": 3, "RESULT_TX_INCLUSION_GRACE_BLOCKS": 5,
                                      "RESULT_TX_REBROADCAST_INTERVAL_BLOCKS": 4}})
    assert d.links[0].config.ping_interval_s == 3.0
    assert (d.jobs.grace_blocks, d.jobs.interval_blocks) == (5, 4)
    pinned = _daemon(tmp_path, quic_interval_blocks=2)  # a runner.toml value pins it
    pinned._set_block_time({"block_time_ms": 1000})
    pinned._apply_params({"cip11_params": {"HEARTBEAT_BLOCKS": 3}})
    assert pinned._ping_interval_s() == 2.0
