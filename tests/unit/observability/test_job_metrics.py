"""Job metrics through ``GET /metrics`` after blocks with jobs, and the per-block job transition counter.

Two runners register (block 1); a job with ``timeout_blocks`` 10 is assigned to one of them (block 2), which
stays silent: at deadline + 1 the job is re-selected to the other runner, which commits and then reveals. The
node marks every registered runner present, so the committed PresenceInput has them all.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from dataclasses import replace

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, Reveal
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.node.node import Node
from cowboy_node.observability.job_activity import TRANSITIONS, count_transitions
from cowboy_node.observability.metrics import start_metrics_server
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.helpers import ALICE, ALICE_SK
from tests.unit.node_harness import (
    JOB_EXAMPLE,
    RUNNER_SKS,
    RUNNERS,
    STAKE,
    Nonces,
    example_caps,
    make_dev,
    make_node,
    produce,
)


def present_node() -> Node:
    """Every runner registered as of the parent block has a live session (what the transport will report)."""
    chain = Chain(MemoryStore(), make_dev(phase=2).genesis)
    return make_node(phase=2, chain=chain, local_presence=lambda: frozenset(range(registry_size(chain.world()))))


def _scrape(node: Node) -> str:
    """The text of ``GET /metrics`` from the real metrics server."""

    async def go() -> str:
        runner = await start_metrics_server(node.metrics, "127.0.0.1", 0)
        try:
            port = runner.addresses[0][1]
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, lambda: urllib.request.urlopen(
                f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())
        finally:
            await runner.cleanup()

    return asyncio.run(go())


def _value(text: str, name: str, labels: str = "") -> float:
    pattern = re.escape(name + (f"{{{labels}}}" if labels else "")) + r" ([0-9.e+-]+)\n"
    m = re.search(pattern, text)
    assert m is not None, f"{name}{{{labels}}} not in /metrics"
    return float(m.group(1))


def _transitions(text: str) -> dict[str, float]:
    return {t: _value(text, "cowboy_job_transitions_total", f'transition="{t}"') for t in TRANSITIONS}


def test_job_metrics_after_a_submission_a_reselection_a_commit_and_a_reveal() -> None:
    node = present_node()
    try:
        text = _scrape(node)
        assert _transitions(text) == dict.fromkeys(TRANSITIONS, 0.0)  # exported before any job
        n = Nonces()
        caps, card = example_caps()
        produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:2]])
        doc = json.loads(JOB_EXAMPLE.read_text())
        doc["timeout_blocks"] = 10
        submit = n.tx(ALICE_SK, JobSubmit(parse_job_request_json(doc)))
        assert [r.error_code for r in produce(node, [submit])] == [None]
        job_id = derive_job_id(submit.tx_hash(), 0)
        text = _scrape(node)
        assert _transitions(text) == {**dict.fromkeys(TRANSITIONS, 0.0), "submitted": 1.0, "assigned": 1.0}
        assert _value(text, "cowboy_job_selection_seconds_count", 'phase="filter"') == 1.0
        assert _value(text, "cowboy_job_selection_seconds_count", 'phase="draw"') == 1.0
        assert _value(text, "cowboy_present_pool_size") == 2.0  # both runners registered as of block 1
        assert _value(text, "cowboy_job_reselections_total") == 0.0

        first = node.api.job(job_id)
        assert first is not None
        while node.chain.height <= first["deadline_block"]:  # the first runner stays silent
            produce(node, [])
        second = node.api.job(job_id)
        assert second is not None and second["attempt"] == 1 and second["committee"] != first["committee"]
        text = _scrape(node)
        assert _value(text, "cowboy_job_reselections_total") == 1.0
        assert _transitions(text)["assigned"] == 2.0
        assert _value(text, "cowboy_job_selection_seconds_count", 'phase="draw"') == 2.0

        other = RUNNERS.index(bytes.fromhex(second["committee"][0][2:].lower()))
        sk = RUNNER_SKS[other]
        commit = result_commitment(job_id, RUNNERS[other], b'{"v": 2}', b"s")
        assert [r.error_code for r in produce(node, [n.tx(sk, JobResultCommit(job_id, commit))])] == [None]
        assert [r.error_code for r in produce(node, [n.tx(sk, JobResultSubmit(job_id, b'{"v": 2}', b"s", 0))])] \
            == [None]
        text = _scrape(node)
        assert _transitions(text) == {"submitted": 1.0, "assigned": 2.0, "committed": 1.0, "revealed": 1.0,
                                      "settled": 1.0, "failed": 0.0}
        assert _value(text, "cowboy_job_selection_seconds_count", 'phase="draw"') == 2.0
    finally:
        node.close()


def _rec(**kw: object) -> JobRecord:
    base = JobRecord(job_id=b"\x01" * 32, spec=b"", status=JobStatus.ASSIGNED, mode_byte=0, seed=b"\x02" * 32,
                     committee=(b"\x03" * 20,), attempt=0, excluded=(), assignment_height=5, deadline_block=15,
                     commit_end=11, commits=(), reveals=(), escrow=10, payer=ALICE, outcome=None, reason="",
                     finished_at=0)
    return replace(base, **kw)  # type: ignore[arg-type]


def _count(old: JobRecord | None, new: JobRecord) -> tuple[dict[str, int], int]:
    """(non-zero transition counts, re-selections) of one record change."""
    counts = dict.fromkeys(TRANSITIONS, 0)
    reselections = count_transitions(old, new, counts)
    return {k: v for k, v in counts.items() if v}, reselections


def test_count_transitions_of_each_record_change() -> None:
    r = b"\x03" * 20
    pending = _rec(status=JobStatus.PENDING_SELECTION, committee=(), assignment_height=0, deadline_block=0,
                   commit_end=0, seed=b"")
    assigned = _rec()
    committed = _rec(commits=((r, b"\x09" * 32),))
    revealed = _rec(commits=((r, b"\x09" * 32),), reveals=((r, Reveal(b"x", 0)),))
    settled = replace(revealed, status=JobStatus.COMPLETED, outcome=b"x", reason="verified", finished_at=20)
    reselected = _rec(attempt=1, assignment_height=16, deadline_block=26, commit_end=22, excluded=(r,),
                      committee=(b"\x04" * 20,))
    failed = replace(reselected, status=JobStatus.FAILED, reason="retries_exhausted", finished_at=27)
    assert _count(None, pending) == ({"submitted": 1}, 0)
    assert _count(None, assigned) == ({"submitted": 1, "assigned": 1}, 0)
    assert _count(pending, assigned) == ({"assigned": 1}, 0)
    assert _count(assigned, committed) == ({"committed": 1}, 0)
    assert _count(committed, revealed) == ({"revealed": 1}, 0)
    assert _count(revealed, settled) == ({"settled": 1}, 0)
    assert _count(assigned, settled) == ({"committed": 1, "revealed": 1, "settled": 1}, 0)
    assert _count(committed, reselected) == ({"assigned": 1}, 1)
    assert _count(reselected, failed) == ({"failed": 1}, 0)
    assert _count(settled, settled) == ({}, 0)
