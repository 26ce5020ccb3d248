"""Golden determinism corpus: actor calls run from genesis, their receipts, gas and state roots pinned.

``tests/vectors/determinism/corpus.json`` holds, for every block, the header's state root
and receipts root and, for every transaction, its receipt (status, error, cycles, cells,
fee, events) and canonical encoding.  The calls (``actors/main.py``, one case per call)
exercise every table-dependent str method over non-ASCII text, big integers, floats,
sorting, dicts, exceptions and every host call; timers and mailbox messages they create
run in later blocks.  Any interpreter, dependency or code change that moves a byte fails
here.  The test never regenerates the file: ``scripts/gen_determinism_corpus.py`` does,
on purpose, after a reviewed protocol change (see docs/pvm.md).

Regenerated for the S16 timer layout (issue 20 item 4: the Timer record moved into its height-index entry,
``timer/t/<timer_id>`` became a 16-byte pointer, docs/timers.md §2): the ``schedule_timer`` case writes 18 cells
fewer per timer (1390 -> 1336 cells for its three timers, its fee with them), so that receipt, its block's
receipts root and the state roots from that block on moved; every other receipt byte (status, cycles, events) is
as generated at 38962fb.

Regenerated when the timer id pointer and the per-actor timer index left the state tree (``state/derived.py``,
docs/timers.md §2): the state roots of blocks 10–12, where the ``schedule_timer`` case's timers are live, moved;
every receipt, receipts root and the other blocks' state roots (the final one included: no timer is left) are as
before.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.pvm import unicode_str as unistr
from cowboy_node.execution.pvm import unicode_tables
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.types.instructions import CallActor, DeployActor, Transfer
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, make_tx
from tests.unit.chain.test_chain import produce

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "determinism"
CORPUS = VECTORS / "corpus.json"
CALLS_PER_BLOCK = 6
#: cycles for each case call: enough for every case but out_of_cycles, which must exhaust it
CASE_CYCLES = 3_000_000


def _source(name: str) -> str:
    return (VECTORS / "actors" / f"{name}.py").read_text(encoding="utf-8")


def case_names(source: str) -> list[str]:
    """The case names of ``actors/main.py``, in the order of its CASES table."""
    body = source.split("CASES = {", 1)[1].split("}", 1)[0]
    return [part.split(":")[0].strip().strip('"') for part in body.split(",") if ":" in part]


def run_corpus() -> dict[str, Any]:
    """Run the corpus from a fresh dev genesis and return the document ``corpus.json`` pins."""
    dev = make_dev_genesis()
    chain = Chain(MemoryStore(), dev.genesis)
    main_src, peer_src = _source("main"), _source("peer")
    peer = derive_actor_address(ALICE, b"peer", peer_src)
    main = derive_actor_address(ALICE, b"main", main_src)
    nonce = 0

    def tx(ins: Any, cycles: int = CASE_CYCLES) -> Any:
        nonlocal nonce
        t = make_tx(ALICE_SK, nonce, ins, cycles_limit=cycles, cells_limit=400_000)
        nonce += 1
        return t

    setup = [("deploy_peer", tx(DeployActor(source=peer_src, salt=b"peer", init_handler="", init_payload=b""))),
             ("deploy_main", tx(DeployActor(source=main_src, salt=b"main", init_handler="init", init_payload=peer),
                                20_000_000)),
             ("fund_main", tx(Transfer(to=main, amount=10**18)))]
    cases = [(name, tx(CallActor(actor=main, handler="run", payload=name.encode())))
             for name in case_names(main_src)]
    blocks = [setup] + [cases[i:i + CALLS_PER_BLOCK] for i in range(0, len(cases), CALLS_PER_BLOCK)]
    blocks += [[], [], [], [], []]  # timers fire and mailbox messages run in End of Block
    out_blocks = []
    for labelled in blocks:
        block = produce(chain, dev, [t for _, t in labelled], ts=1_700_000_000_000 + 1000 * (chain.height + 1))
        head = block.block.header
        receipts = block.result.receipts
        chain.commit(block)
        out_blocks.append({
            "height": head.height,
            "state_root": head.state_root.hex(),
            "receipts_root": head.receipts_root.hex(),
            "cycles_used": head.cycles_used,
            "txs": [{"label": label, "receipt": r.to_json(), "receipt_cbor": r.encode().hex()}
                    for (label, _), r in zip(labelled, receipts, strict=True)],
        })
    return {
        "pvm_version": dev.genesis.pvm_version,
        "actors": {"main": "0x" + main.hex(), "peer": "0x" + peer.hex()},
        "blocks": out_blocks,
        "final_state_root": chain.head.header.state_root.hex(),
    }


def test_corpus_covers_at_least_50_calls() -> None:
    doc = json.loads(CORPUS.read_text(encoding="utf-8"))
    calls = [t for b in doc["blocks"] for t in b["txs"] if not t["label"].startswith(("deploy", "fund"))]
    assert len(calls) >= 50
    assert [t["label"] for t in calls] == case_names(_source("main"))


def test_replaying_the_corpus_reproduces_every_pinned_byte() -> None:
    expected = json.loads(CORPUS.read_text(encoding="utf-8"))
    got = run_corpus()
    for want, have in zip(expected["blocks"], got["blocks"], strict=True):
        for w, h in zip(want["txs"], have["txs"], strict=True):
            assert h == w, f"block {want['height']} {w['label']}"
        assert have == want, f"block {want['height']}"
    assert got == expected


@pytest.mark.skipif(unicodedata.unidata_version != unicode_tables.UNICODE_VERSION,
                    reason="not applicable: CPython's own str methods are the pinned ones only on Unicode 14.0.0 "
                           "(CPython 3.11)")
def test_pinned_semantics_are_indistinguishable_from_cpython_3_11(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPython 3.11's own str methods, repr and number parsing instead of the pinned implementation (the
    # charges stay: they are protocol): same bytes.  Under CPython 3.12 or 3.13 the same switch moves
    # 13 of the 64 receipts and 16 of the 17 state roots.
    monkeypatch.setattr(unistr, "predicate", lambda name, s: getattr(s, name)())
    for name in list(unistr.MAPPINGS):
        monkeypatch.setitem(unistr.MAPPINGS, name, getattr(str, name))
    monkeypatch.setattr(unistr, "strip", lambda s, name: getattr(s, name)())
    monkeypatch.setattr(unistr, "split", lambda s, n: s.split(None, n))
    monkeypatch.setattr(unistr, "rsplit", lambda s, n: s.rsplit(None, n))
    monkeypatch.setattr(unistr, "splitlines", lambda s, keep: s.splitlines(keep))
    monkeypatch.setattr(unistr, "repr_str", repr)
    monkeypatch.setattr(unistr, "parse_int", int)
    monkeypatch.setattr(unistr, "parse_float", float)
    assert run_corpus() == json.loads(CORPUS.read_text(encoding="utf-8"))
