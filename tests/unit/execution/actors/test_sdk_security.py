"""The continuation machinery adds no way out of the sandbox and no way to forge a resume."""

from __future__ import annotations

import pytest
from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors import sdk_bridge
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_node.execution.actors.sdk_surface import transform
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import PvmError, call_handler, compile_actor
from cowboy_protocol.types.instructions import CallActor
from tests.helpers import ALICE_SK
from tests.unit.execution.actors.test_actor_sdk import FakeHost
from tests.unit.execution.actors.test_sdk_continuations import _net, _pending_sdk_jobs


def run(src: str, handler: str = "h", payload: bytes = b"") -> bytes:
    return call_handler(compile_actor(src, transform=transform), handler, payload, meter=Meter(5_000_000, 1 << 20),
                        modules=sdk_bridge.modules_for(FakeHost()))


def failure(src: str, handler: str = "h") -> str:
    with pytest.raises(PvmError) as err:
        run(src, handler)
    assert err.value.code == "handler_error"
    return err.value.message


def test_leg_marks_only_decorate_the_actors_own_functions() -> None:
    src = "from cowboy_sdk import pvm_fsm, codec\n\ndef h(p):\n    pvm_fsm.initial_leg(0, None)(codec.encode)\n" \
          "    return b''\n"
    assert "can only decorate functions defined by the actor" in failure(src)


def test_capture_makes_only_capture_objects_writable() -> None:
    assert run("from cowboy_sdk import capture\n\ndef h(p):\n    c = capture()\n    c.x = 1\n"
               "    return str(c.x).encode()\n") == b"1"
    src = "from cowboy_sdk import capture, runner\n\ndef h(p):\n    capture()\n    r = runner.RunnerResult(b'x')\n" \
          "    r.raw = 2\n    return b''\n"
    assert "cannot set or delete attributes of RunnerResult" in failure(src)


def test_an_aliased_continuation_decorator_never_reaches_the_sdk_compiler() -> None:
    src = ("from cowboy_sdk import actor, public, runner\n\nc = runner.continuation\n\n@actor\nclass A:\n"
           "    @public\n    @c\n    async def f(self, p):\n        x = await runner.http('http://a.example/')\n"
           "        return b''\n")
    with pytest.raises(Exception) as err:  # async defs the lowering did not see are refused by the policy
        compile_actor(src, transform=transform)
    assert "async" in str(err.value)
    src = "from cowboy_sdk import runner\n\ndef h(p):\n    runner.continuation(h)\n    return b''\n"
    assert failure(src).startswith("SyntaxError: aliased/indirect continuation decorators are not supported")


def test_an_outside_caller_cannot_forge_a_resume() -> None:
    net, actor = _net()
    net.block([net.tx(ALICE_SK, CallActor(actor, "refresh", sdk_codec.encode("paris")))])
    [(_, rec)] = _pending_sdk_jobs(net)
    forged = sdk_codec.encode({"cid": rec.cid.hex(), "result": {"text": "forged"}, "reply_handler": "refresh__resume",
                               "correlation_id": None})
    p = net.block([net.tx(ALICE_SK, CallActor(actor, "refresh__resume", forged))])
    r = p.result.receipts[0]
    assert r.error_code == "handler_error" and "PermissionDeniedError" in (r.error_message or "")
    assert get_state(net.chain.world(), actor, b"page") is None  # the continuation waits for the real reply
    assert len(_pending_sdk_jobs(net)) == 1
