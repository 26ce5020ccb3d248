"""cowboy_sdk conventions the PVM honours: a ``None`` return is "no output", ``_helper`` names are private helpers.

The sandbox escape corpora (tests/vectors/pvm_escapes, sdk_escapes) keep failing; ``test_pvm_escapes`` and
``test_actor_sdk`` run them. Here: the new rules and their limits.
"""

from __future__ import annotations

import pytest

from cowboy_node.execution.actors import sdk_bridge
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected, PvmError, call_handler, compile_actor
from tests.unit.execution.actors.test_actor_sdk import FakeHost

CYCLES = 5_000_000


def run(src: str, handler: str = "handler", payload: bytes = b"") -> bytes:
    return call_handler(compile_actor(src), handler, payload, meter=Meter(CYCLES, 1 << 20),
                        modules=sdk_bridge.modules_for(FakeHost()))


def test_none_return_is_empty_output() -> None:
    assert run("def handler(payload):\n    return None\n") == b""
    assert run("def handler(payload):\n    pass\n") == b""


def test_other_non_bytes_returns_still_fail() -> None:
    with pytest.raises(PvmError) as err:
        run("def handler(payload):\n    return 0\n")
    assert err.value.code == "bad_return_type"


def test_sdk_actor_whose_lookup_misses_returns_no_output() -> None:
    # plain @public is decode="cbor": a None return is the SDK codec's "no output" (empty bytes)
    src = ("from cowboy_sdk import actor, public\n\n@actor\nclass A:\n    @public(decode='raw')\n"
           "    def f(self, payload):\n        return self.storage.get('missing')\n")
    assert run(src, "f") == b""


def test_private_helper_function_deploys_and_runs() -> None:
    src = "def _double(x):\n    return x * 2\n\n_SCALE = 3\n\ndef handler(payload):\n" \
          "    _n = _double(len(payload)) * _SCALE\n    return str(_n).encode()\n"
    assert run(src, payload=b"ab") == b"12"


def test_private_helper_is_not_a_handler() -> None:
    compiled = compile_actor("def _helper(p):\n    return p\n\ndef handler(p):\n    return _helper(p)\n")
    assert compiled.handlers == ("handler",)
    with pytest.raises(PvmError) as err:
        call_handler(compiled, "_helper", b"", meter=Meter(CYCLES, 1 << 20))
    assert err.value.code == "no_such_handler"


@pytest.mark.parametrize("src", [
    "x = __builtins__\n",                          # dunder name
    "def __helper():\n    pass\n",                   # dunder function
    "def handler(p):\n    return _pvm_charge\n",     # the instrumenter's helpers
    "_pvm_d = 1\n",
])
def test_dunder_and_instrumenter_names_stay_refused(src: str) -> None:
    with pytest.raises(ActorRejected) as err:
        compile_actor(src)
    assert err.value.rule == "underscore_name"


def test_private_attribute_access_stays_refused() -> None:
    # a private *name* is the actor's own; a private *attribute* may be an SDK object's internals
    with pytest.raises(ActorRejected) as err:
        compile_actor("def handler(p):\n    return p._x\n")
    assert err.value.rule == "private_attribute"
