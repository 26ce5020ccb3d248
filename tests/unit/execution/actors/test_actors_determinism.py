"""An actor workload gives the same state root and block hash under different PYTHONHASHSEEDs."""

from __future__ import annotations

from tests.helpers import run_under_hash_seeds

SCRIPT = r'''
from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.types.instructions import CallActor, DeployActor
from tests.helpers import ALICE, ALICE_SK, make_dev_genesis, make_tx
from tests.unit.chain.test_chain import produce

SRC = """import json
import pvm_host

def init(payload):
    pvm_host.set_state(b"n", b"0")
    return b""

def work(payload):
    words = {}
    for w in payload.decode().split():
        words[w] = words.get(w, 0) + 1
    n = int(pvm_host.get_state(b"n")) + 1
    pvm_host.set_state(b"n", str(n).encode())
    pvm_host.set_state(b"w:" + str(n).encode(), json.dumps(words, sort_keys=True).encode())
    pvm_host.emit_event("work", repr(sorted(words.items())).encode())
    seen = [k + b"=" + v for k, v in pvm_host.scan_state_prefix(b"w:", 10)]
    try:
        pvm_host.call_actor(pvm_host.self_address(), "fail", b"", 20_000)
    except pvm_host.HostError as e:
        pvm_host.set_state(b"err", e.name.encode())
    if n == 1:
        pvm_host.schedule_timer(pvm_host.current_block() + 2, b"later")
    return b"|".join(seen)

def fail(payload):
    pvm_host.set_state(b"never", b"1")
    return {"a": 1}["b"]

def spin(payload):
    pvm_host.set_state(b"never", b"2")
    while True:
        pass
"""
dev = make_dev_genesis()
chain = Chain(MemoryStore(), dev.genesis)
addr = derive_actor_address(ALICE, b"", SRC)
nonce = 0


def tx(ins, cycles=2_000_000):
    global nonce
    t = make_tx(ALICE_SK, nonce, ins, cycles_limit=cycles, cells_limit=200_000)
    nonce += 1
    return t


blocks = [
    [tx(DeployActor(source=SRC, salt=b"", init_handler="init", init_payload=b""))],
    [tx(CallActor(actor=addr, handler="work", payload=b"b a c a")),
     tx(CallActor(actor=addr, handler="spin", payload=b""), 100_000)],
    [tx(CallActor(actor=addr, handler="work", payload=b"zeta alpha zeta"))],
    [tx(CallActor(actor=addr, handler="work", payload=b"x"))],
]
out = []
for txs in blocks:
    block = produce(chain, dev, txs, ts=1_700_000_000_000 + 1000 * (chain.height + 1))
    out.extend((r.status, r.error_code) for r in block.result.receipts)
    chain.commit(block)
# the workload must really exercise success and failure paths
assert out == [(0, None), (0, None), (1, "out_of_cycles"), (0, None), (0, None)], out
print(chain.head.header.state_root.hex(), chain.head.hash().hex(), len(out))
'''


def test_actor_workload_state_root_does_not_depend_on_hash_seed() -> None:
    outs = run_under_hash_seeds(SCRIPT)
    assert outs[0] == outs[1] and len(outs[0].split()) == 3
