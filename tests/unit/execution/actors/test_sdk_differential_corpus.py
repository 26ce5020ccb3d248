"""Actors written as the cowboy-actor-sdk documentation shows them, run step by step in the SDK's own
``SimulatedChain`` (CPython over ``cowboy_sdk.mock_host``) and on the node (deployed by transaction, each call a
block built and verified by a follower): after every step the handler's outcome (returned bytes, or the
exception's type and message), the events it emitted and the actor's raw storage are compared.

The actors are in ``tests/vectors/sdk_differential/`` (storage, unicode text, big integers, errors, events,
cross-actor calls) plus ``tests/vectors/sdk_actors/ticker.py`` (timers, with the SDK's ``get_block_height``).
The continuation actor has its own differential (``test_sdk_differential.py``). Every normalisation below is a
difference docs/actors.md §8 ("Differential: remaining differences") lists; the tests that pin them are at the end.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cowboy_sdk import codec as sdk_codec
from cowboy_sdk import mock_host
from cowboy_sdk.testing import SimulatedChain

from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import scan_state
from cowboy_node.types.receipt import Receipt
from cowboy_protocol.codec import decode
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis
from tests.unit.execution.jobs.test_jobs_e2e import Net

E = sdk_codec.encode
ROOT = Path(__file__).resolve().parents[4]


def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


CORPUS = ROOT / "tests/vectors/sdk_differential"
TICKER_DOCS = ROOT / "tests/vectors/sdk_actors/ticker.py"
"""The ticker as the SDK's timer docstring writes it (``runtime.current_block()``)."""
TICKER_SDK = _source(TICKER_DOCS).replace("runtime.current_block()", "runtime.get_block_height()")
"""The same ticker with the name SDK 0.1.6's ``runtime`` has (the node has both)."""


@dataclass(frozen=True)
class Outcome:
    """What one step did, in terms both sides can express."""

    returned: bytes | None = None
    """The handler's bytes (``None`` returns are "no output", ``b""``, on both sides)."""
    error: tuple[str, str] | None = None
    """``(exception type, message)`` of a failed call."""
    events: tuple[tuple[str, bytes], ...] = ()
    """``(topic, data)`` of every event the actor emitted, in order."""


@dataclass
class Side:
    """One actor on one side: ``call(handler, payload)``, ``advance(blocks)`` (timers fire), ``storage()``."""

    call: Callable[[str, bytes], Outcome]
    advance: Callable[[int], None]
    storage: Callable[[], dict[bytes, bytes]]


# ---- the node ------------------------------------------------------------------------------------------

_AT_LINE = re.compile(r" at line \d+$")


def _node_outcome(r: Receipt, actor: bytes) -> Outcome:
    events = tuple((e.topic, e.data) for e in r.events if e.topic != "actor.returned" and e.emitter == actor)
    if r.error_code is None:
        [ret] = [e for e in r.events if e.topic == "actor.returned"] or [None]
        value = decode(ret.data) if ret is not None else b""
        assert isinstance(value, bytes)
        return Outcome(returned=value, events=events)
    message = _AT_LINE.sub("", r.error_message or "")  # the node adds the actor's line (docs/protocol.md §3.1)
    kind, _, text = message.partition(": ")
    return Outcome(error=(kind, text), events=events)


def _node(sources: list[str]) -> tuple[Net, list[bytes]]:
    net = Net(make_dev_genesis(balances={ALICE: 10**24}))
    net.block([net.tx(ALICE_SK, DeployActor(src, b"", "", b"")) for src in sources])
    actors = [derive_actor_address(ALICE, b"", src) for src in sources]
    # an actor pays for its own timers on the node (mock_host charges nothing): fund it
    net.block([net.tx(ALICE_SK, Transfer(a, 10**20)) for a in actors])
    return net, actors


def _node_side(net: Net, actor: bytes) -> Side:
    def call(handler: str, payload: bytes) -> Outcome:
        p = net.block([net.tx(ALICE_SK, CallActor(actor, handler, payload))])
        return _node_outcome(p.result.receipts[0], actor)

    def advance(blocks: int) -> None:
        for _ in range(blocks):
            net.block([])

    def storage() -> dict[bytes, bytes]:
        return dict(scan_state(net.chain.world(), actor, b"", 10_000))

    return Side(call, advance, storage)


# ---- SimulatedChain ------------------------------------------------------------------------------------

def _sim_outcome(run: Callable[[], Any], chain: SimulatedChain) -> Outcome:
    before = len(chain.events())
    try:
        value = run()
    except Exception as e:  # the SDK's chain raises the handler's exception to the caller
        return Outcome(error=(type(e).__name__, str(e)), events=tuple(chain.events()[before:]))
    return Outcome(returned=b"" if value is None else bytes(value), events=tuple(chain.events()[before:]))


@pytest.fixture
def sim_import(tmp_path: Path) -> Iterator[Callable[[str, str], Any]]:
    """Import an actor module the way the SDK's docs run actors locally (after SimulatedChain installed
    ``pvm_host``); the modules are removed again afterwards."""
    names: list[str] = []

    def load(source: str, name: str) -> Any:
        path = tmp_path / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        SimulatedChain()
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        names.append(name)
        spec.loader.exec_module(module)
        return module

    yield load
    for name in names:
        sys.modules.pop(name, None)


def _sim_side(instance: Any, *, address: bytes, height: int) -> tuple[Side, SimulatedChain]:
    chain = SimulatedChain(actor=instance, sender=ALICE, block_height=height)
    mock_host.set_context(actor_addr=address)

    def host() -> None:
        # the node's PVM installs its own ``pvm_host`` module while it runs SDK code; the SDK looks it up per call
        sys.modules["pvm_host"] = chain._host

    def call(handler: str, payload: bytes) -> Outcome:
        host()
        chain.set_block_height(chain.block_height + 1)  # each node call is a block of its own
        return _sim_outcome(lambda: chain.call(handler, payload), chain)

    def advance(blocks: int) -> None:
        host()
        chain.advance_block(blocks)  # fires every due timer, as the node's End of Block does

    return Side(call, advance, chain.snapshot), chain


def _pair(sim_import: Callable[[str, str], Any], path: Path | str, cls: str) -> tuple[Side, Side, Net, bytes]:
    source = path if isinstance(path, str) else _source(path)
    name = "ticker_sdk" if isinstance(path, str) else path.stem
    net, [actor] = _node([source])
    module = sim_import(source, f"sdkdiff_{name}")
    sim, _ = _sim_side(getattr(module, cls)(), address=actor, height=net.chain.height)
    return sim, _node_side(net, actor), net, actor


def _same(sim: Side, node: Side, steps: list[tuple[str, bytes]]) -> list[Outcome]:
    """Run ``steps`` on both sides; after each, outcome and storage must be equal. Returns the outcomes."""
    outcomes = []
    for handler, payload in steps:
        want = sim.call(handler, payload)
        got = node.call(handler, payload)
        assert got == want, (handler, payload, got, want)
        assert node.storage() == sim.storage(), (handler, payload)
        outcomes.append(got)
    return outcomes


# ---- the corpus ----------------------------------------------------------------------------------------

def test_storage(sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "store.py", "Store")
    out = _same(sim, node, [
        ("init", b""),
        ("put", sdk_codec.encode({"k": "alpha", "v": [1, "two", {"three": 3.5}, None, True]})),
        ("put", sdk_codec.encode({"k": "beta", "v": {"nested": {"deep": [b"\x00\xff", -1]}}})),
        ("get", E("alpha")), ("get", E("cfg")), ("get", E("absent")),
        ("drop", E("alpha")), ("drop", E("alpha")),
        ("nothing", b""),  # returns None: "no output" on both
    ])
    assert sdk_codec.decode(out[3].returned or b"") == [1, "two", {"three": 3.5}, None, True]
    assert [o.returned for o in out[6:9]] == [b"1", b"0", b""]


@pytest.mark.parametrize("text", ["straße", "İstanbul ǅemal", "ﬁnal ΣΑΣ", "日本語🙂", "ǰ̌ ᾳ", "\U0001e900\U0001e922"])
def test_unicode_text(sim_import: Callable[[str, str], Any], text: str) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "text.py", "Text")
    _same(sim, node, [("shout", E(text))])


@pytest.mark.parametrize("digits", ["٣٤٥", "१२३", "๕๖", "１２", "42"])
def test_digits_of_other_scripts(sim_import: Callable[[str, str], Any], digits: str) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "text.py", "Text")
    [out] = _same(sim, node, [("digits", E(digits))])
    assert sdk_codec.decode(out.returned or b"")["int"] == int(digits)


def test_big_integers(sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "numbers.py", "Numbers")
    out = _same(sim, node, [("compute", sdk_codec.encode(n)) for n in (5, 25, 60, 200)])
    fact60 = 8320987112741390144276341183223364380754172606361245952449277696409600000000000000
    assert sdk_codec.decode(out[2].returned or b"")["fact"] == fact60


def test_errors_raised_by_the_actor_and_by_python(sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "errors.py", "Errors")
    _same(sim, node, [("init", b"")])
    for handler, payload, kind in [("missing", E("y"), "KeyError"),
                                   ("divide", E(0), "ZeroDivisionError"), ("typed", E({"m": 1}), "KeyError"),
                                   ("typed", b"\xff", "CodecError"), ("private", b"", "PermissionDeniedError")]:
        [out] = _same(sim, node, [(handler, payload)])
        assert out.error is not None and out.error[0] == kind, out
    [raw] = _same(sim, node, [("raw", b"\x00abc")])
    assert raw.returned == b"cba\x00"
    [ok] = _same(sim, node, [("typed", sdk_codec.encode({"n": 41}))])
    assert sdk_codec.decode(ok.returned or b"") == 42


def test_events(sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "events.py", "Events")
    out = _same(sim, node, [("update", E(17)), ("note", E("héllo"))])
    assert [t for t, _ in out[0].events] == ["price_update"]
    assert sdk_codec.decode(out[0].events[0][1]) == {"price": 17, "unit": "µ"}
    assert [t for t, _ in out[1].events] == ["note", "note.cbor"]


def test_cross_actor_calls(sim_import: Callable[[str, str], Any]) -> None:
    caller_src, callee_src = _source(CORPUS / "caller.py"), _source(CORPUS / "callee.py")
    net, [caller, callee] = _node([caller_src, callee_src])
    callee_module = sim_import(callee_src, "sdkdiff_callee")
    caller_module = sim_import(caller_src, "sdkdiff_caller")
    sim, _ = _sim_side(caller_module.Caller(), address=caller, height=net.chain.height)
    callee_instance = callee_module.Callee()

    def route(target: bytes, method: str, payload: bytes, cycles: int, access: int) -> bytes:
        # the mock host has one actor's storage; the callee is stateless, so running it in place is faithful
        assert bytes(target) == callee
        previous = mock_host.context()
        mock_host.set_context(sender=caller, actor_addr=callee)
        try:
            return getattr(callee_instance, method)(bytes(payload))  # type: ignore[no-any-return]
        except Exception as e:
            raise mock_host.HostError(str(e)) if hasattr(mock_host, "HostError") else RuntimeError(str(e)) from e
        finally:
            mock_host.set_context(sender=previous["sender"], actor_addr=previous["actor_addr"])

    mock_host.set_call_handler(route)
    out = _same(sim, _node_side(net, caller), [
        ("square", sdk_codec.encode({"target": callee, "n": 12})),
        ("square", sdk_codec.encode({"target": callee, "n": 2**40 + 3})),
        ("broken", sdk_codec.encode(callee)),
    ])
    assert [sdk_codec.decode(o.returned or b"") for o in out[:2]] == [144, (2**40 + 3) ** 2]
    assert out[2].returned == b"caught"


def test_timers_fire_at_the_same_heights_with_the_same_state(sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, TICKER_SDK, "Ticker")
    n0, s0 = node.call("init", b""), sim.call("init", b"")
    assert n0 == s0 == Outcome(returned=b"ok"), (n0, s0)
    for _ in range(7):
        sim.advance(1)
        node.advance(1)
        s, n = sim.storage(), node.storage()
        assert sdk_codec.decode(n[b"count"]) == sdk_codec.decode(s[b"count"])
        assert n[b"last_payload"] == s[b"last_payload"] if b"last_payload" in s else b"last_payload" not in n
        # the timer id is the host's: a hash of the timer on the node, a counter in mock_host (documented)
        assert {k for k in n if k != b"timer"} == {k for k in s if k != b"timer"}
        node_id, sim_id = sdk_codec.decode(n[b"timer"]), sdk_codec.decode(s[b"timer"])
        assert len(node_id) == len(sim_id) == 32 and node_id != sim_id
    assert sdk_codec.decode(node.storage()[b"count"]) == 3  # PERIOD 2: fires at +2, +4, +6


# ---- the documented differences (docs/actors.md §8, "Differential: remaining differences") ---------------

def test_difference_a_failed_call_is_reverted_on_the_node_but_not_in_simulated_chain(
        sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, CORPUS / "errors.py", "Errors")
    _same(sim, node, [("init", b"")])
    want = sim.call("fail", E("x"))
    got = node.call("fail", E("x"))
    assert got == want == Outcome(error=("ValueError", "bad input: x"))
    # the handler wrote calls = 1 before raising: a transaction's writes are all-or-nothing on the node
    node_calls = sdk_codec.decode(node.storage()[b"calls"])
    sim_calls = sdk_codec.decode(sim.storage()[b"calls"])
    assert (node_calls, sim_calls) == (0, 1)


def test_difference_the_node_has_runtime_current_block_which_sdk_0_1_6_lacks(
        sim_import: Callable[[str, str], Any]) -> None:
    sim, node, _, _ = _pair(sim_import, TICKER_DOCS, "Ticker")
    assert node.call("init", b"") == Outcome(returned=b"ok")
    want = sim.call("init", b"")
    assert want.error == ("AttributeError", "module 'cowboy_sdk.runtime' has no attribute 'current_block'")

