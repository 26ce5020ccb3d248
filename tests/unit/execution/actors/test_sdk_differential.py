"""The same continuation actor in the SDK's own ``SimulatedChain`` (CPython, ``mock_host``, the SDK's import-time
FSM compiler) and on the node (deploy-time lowering, PVM, real jobs and results): the requests it sends, its
state after every step (raw storage bytes, continuation records included) and the replies it is resumed with
are compared step by step. Differences that remain are the documented ones (block heights in
``created_at_block``; the cid, which hashes the transaction).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from cowboy_sdk import codec as sdk_codec
from cowboy_sdk.testing import SimulatedChain

from cowboy_node.execution.actors.actor_state import scan_state
from cowboy_protocol.types.instructions import CallActor
from cowboy_protocol.types.jobspec import HttpJob, LlmJob, decode_job_spec
from tests.helpers import ALICE_SK
from tests.unit.execution.actors.test_sdk_continuations import WEATHER, _net, _pending_sdk_jobs, _reveal

CONT = b"__continuation:"
HTTP_RESULT = {"text": "21C, sunny", "temp": 21}
LLM_RESULT = "Mild, 21 degrees."


def _normalized(state: dict[bytes, bytes], cid: bytes) -> dict[bytes, Any]:
    """State with the cid replaced by ``<cid>`` and continuation records decoded minus ``created_at_block``."""
    out: dict[bytes, Any] = {}
    for key, value in state.items():
        if key == CONT + cid:
            record = sdk_codec.decode(value)
            del record["created_at_block"]
            out[CONT + b"<cid>"] = record
        else:
            out[key] = value
    return out


def _simulated(tmp_path: Path) -> tuple[list[dict[bytes, Any]], list[dict[str, Any]]]:
    """Run the actor in SimulatedChain: state after each step and the jobs it sent."""
    path = tmp_path / "weather_sim.py"
    path.write_text(WEATHER, encoding="utf-8")
    SimulatedChain()  # installs the SDK's mock pvm_host before the actor module is imported
    spec = importlib.util.spec_from_file_location("weather_sim", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["weather_sim"] = module
    try:
        spec.loader.exec_module(module)
        chain = SimulatedChain(actor=module.Weather())
        states = []
        assert chain.call("refresh", sdk_codec.encode("paris")) is None  # the initial leg: no output
        cid = bytes(chain.jobs()[-1]["cid"])
        states.append(_normalized(chain.snapshot(), cid))
        chain.reply(HTTP_RESULT)
        states.append(_normalized(chain.snapshot(), cid))
        assert chain.reply(LLM_RESULT) == b"done"
        states.append(_normalized(chain.snapshot(), cid))
        return states, chain.jobs()
    finally:
        sys.modules.pop("weather_sim", None)


def _node_state(net: Any, actor: bytes, cid: bytes) -> dict[bytes, Any]:
    return _normalized(dict(scan_state(net.chain.world(), actor, b"", 1000)), cid)


def test_simulated_chain_and_node_agree_step_by_step(tmp_path: Path) -> None:
    sim_states, sim_jobs = _simulated(tmp_path)

    net, actor = _net()
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("paris")))])
    assert p.result.receipts[0].error_code is None
    [(job1, rec1)] = _pending_sdk_jobs(net)
    cid = rec1.cid
    assert _node_state(net, actor, cid) == sim_states[0]
    http = decode_job_spec(net.job(job1).spec).job_type
    assert isinstance(http, HttpJob)
    assert (rec1.job_type, rec1.reply_handler) == (sim_jobs[0]["job_type"], sim_jobs[0]["reply_handler"])
    assert sim_jobs[0]["payload"] == {"args": [http.url], "kwargs": {}}

    _reveal(net, job1, b'{"text": "21C, sunny", "temp": 21}')
    assert _node_state(net, actor, cid) == sim_states[1]
    [(job2, rec2)] = _pending_sdk_jobs(net)
    llm = decode_job_spec(net.job(job2).spec).job_type
    assert isinstance(llm, LlmJob)
    assert sim_jobs[1]["payload"] == {"args": [llm.prompt], "kwargs": {"model": "stub-model", "max_tokens": 64}}
    assert (rec2.job_type, rec2.reply_handler, rec2.cid) == ("llm", sim_jobs[1]["reply_handler"], cid)

    _reveal(net, job2, LLM_RESULT.encode())
    assert _node_state(net, actor, cid) == sim_states[2]
    assert _pending_sdk_jobs(net) == []
