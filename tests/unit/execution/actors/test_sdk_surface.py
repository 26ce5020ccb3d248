"""Every name cowboy_sdk exports is available to actors with the SDK's semantics or refused at deploy with an error
naming it (docs/actors.md "SDK names"); one test per name added for actors here."""

from __future__ import annotations

from pathlib import Path

import cowboy_sdk
import pytest
from cowboy_sdk import codec as sdk_codec

from cowboy_node.execution.actors import sdk_bridge
from cowboy_node.execution.actors.sdk_surface import REFUSED, transform
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected, PvmError, call_handler, compile_actor
from tests.unit.execution.actors.test_actor_sdk import FakeHost

DOC = (Path(__file__).resolve().parents[4] / "docs" / "actors.md").read_text(encoding="utf-8")


def compile_(src: str) -> object:
    return compile_actor(src, transform=transform)


def run(src: str, handler: str, payload: bytes = b"", host: FakeHost | None = None) -> bytes:
    return call_handler(compile_actor(src, transform=transform), handler, payload, meter=Meter(5_000_000, 1 << 20),
                        modules=sdk_bridge.modules_for(host or FakeHost()))


def test_every_exported_name_is_available_or_refused_and_documented() -> None:
    for name in cowboy_sdk.__all__:
        assert (name in sdk_bridge.SDK_VIEW) != (name in REFUSED), name
        assert f"`{name}`" in DOC, f"docs/actors.md does not list {name}"


@pytest.mark.parametrize("name", sorted(n for n in REFUSED if not n.startswith("__")))
def test_refused_names_fail_at_deploy_naming_the_name(name: str) -> None:
    for src in (f"from cowboy_sdk import {name}\n", f"import cowboy_sdk\n\ndef h(p):\n    return cowboy_sdk.{name}\n"):
        with pytest.raises(ActorRejected) as err:
            compile_(src)
        assert err.value.rule == "sdk_name_unavailable" and f"cowboy_sdk.{name}" in err.value.message
        assert REFUSED[name] in err.value.message


def test_unknown_names_fail_at_deploy() -> None:
    with pytest.raises(ActorRejected) as err:
        compile_("from cowboy_sdk import teleport\n")
    assert err.value.rule == "sdk_name_unknown" and "teleport" in err.value.message


def test_emit_decorator_emits_the_return_value() -> None:
    events: list[tuple[str, bytes]] = []

    class Host(FakeHost):
        def emit_event(self, name: str, payload: bytes, schema: object = None) -> dict[str, object]:
            events.append((name, bytes(payload)))
            return {"emit_id": len(events), "sync_outcomes": [], "deferred_subs": []}

    src = ("from cowboy_sdk import actor, emit, public\n\n@actor\nclass A:\n    @public(decode='raw')\n"
           "    @emit('price')\n    def f(self, payload):\n        return b'42'\n")
    assert run(src, "f", b"", Host()) == b"42"
    assert events == [("price", b"42")]


def test_bounded_loop_limits_iterations() -> None:
    src = ("from cowboy_sdk import BoundedRange, actor, bounded_loop, public\n\n@actor\nclass A:\n"
           "    @public(decode='raw')\n    @bounded_loop(max_iterations=3)\n    def f(self, payload):\n"
           "        n = 0\n        for _ in BoundedRange(len(payload)):\n            n += 1\n"
           "        return str(n).encode()\n")
    assert run(src, "f", b"abc") == b"3"
    with pytest.raises(PvmError) as err:
        run(src, "f", b"abcd")
    assert err.value.code == "handler_error" and err.value.message.startswith("LoopBoundExceeded")


def test_sorted_map_and_types() -> None:
    src = ("from cowboy_sdk import SortedMap, to_address_bytes\n\ndef h(payload):\n    m = SortedMap()\n"
           "    m['b'] = 2\n    m['a'] = 1\n"
           "    return (','.join(m.keys()) + ':' + to_address_bytes('0x' + '11' * 20).hex()).encode()\n")
    assert run(src, "h") == b"a,b:" + b"11" * 20


def test_sdk_errors_are_catchable_by_name() -> None:
    src = ("from cowboy_sdk import ContinuationNotFoundError, load_cont\n\ndef h(payload):\n    try:\n"
           "        load_cont(b'\\x00' * 32)\n    except ContinuationNotFoundError:\n        return b'missing'\n"
           "    return b'found'\n")
    assert run(src, "h") == b"missing"


def test_emit_on_a_foreign_function_is_refused() -> None:
    # the wrapper escape hatch only covers the actor's own functions
    src = "from cowboy_sdk import emit, codec\n\ndef h(payload):\n    emit('x')(codec.encode)\n    return b''\n"
    with pytest.raises(PvmError) as err:
        run(src, "h")
    assert err.value.code == "handler_error" and "can only decorate functions defined by the actor" in err.value.message


def test_quick_start_helper_and_payload_codec() -> None:
    # the README's module-level shims: a private helper (_a) and handlers delegating to the class
    src = ("from cowboy_sdk import actor, public\n\n@actor\nclass A:\n    @public\n    def init(self, payload):\n"
           "        self.storage['calls'] = 0\n        return b'ok'\n\ndef _a(): return A()\n"
           "def init(p): return _a().init(p)\n")
    assert run(src, "init", sdk_codec.encode(None)) == b"ok"
