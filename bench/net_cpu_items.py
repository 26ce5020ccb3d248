"""Where a validator's CPU goes per transfer on the N-validator network, itemised (issue 20 item 5). Prints JSON.

One run of ``bench/chain_throughput_network.py``'s network (``--load``: a paced rate or ``max``) with py-spy
sampling every validator (``net_pyspy``: 200 Hz, all threads, idle excluded) for the load's duration. Every sample
is put in the first item of :data:`ITEMS` whose rule matches its stack; the idle event loop (uvloop's wait shows
as ``Runner.run`` itself) and any thread pool's worker waiting for work (``_worker`` as the leaf: the block
builder's, the journal's, the verifiers') are dropped. An item's share of the busy
samples, times the run's CPU-µs per included transfer per validator (``/proc``, everything the process did),
gives its µs. py-spy counts a thread that is runnable but waiting for a core as busy, so on a loaded machine the
shares are approximate (±1–2 points between runs); the py-spy run's own CPU figure is inflated by sampling, so
``--cpu-us`` takes the figure of a run without py-spy (e.g. the A/B's median) when given.

With ``--base DIR`` (a ``git worktree`` of a baseline commit), the same is done with the validators importing
``cowboy_node`` from DIR first, and the JSON has both itemisations and the per-item difference.

``--p2p-transport tcp`` runs the validators' links over TCP (``[p2p] transport``); with ``--base`` this checkout it
itemises the QUIC and the TCP link side by side.

Usage: python -m bench.net_cpu_items [--load 1000] [--paced-s 20] [--base DIR] [--cpu-us NEW[,BASE]]
       [--p2p-transport quic|tcp] [--base-p2p-transport quic|tcp]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.chain_throughput_network import _defaults, _with_pythonpath
from cowboy_node.p2p.peer_link import TRANSPORTS

Rule = Callable[[list[str], str], bool]
"""(function names of the stack, root first; the raw stack text) -> whether the sample belongs to the item."""


def _in(*names: str) -> Rule:
    return lambda f, raw: all(n in f for n in names)


def _any(*names: str) -> Rule:
    return lambda f, raw: any(n in f for n in names)


def _both(a: Rule, b: Rule) -> Rule:
    return lambda f, raw: a(f, raw) and b(f, raw)


_RPC, _GOSSIP = _any("handle_submit", "handle_submit_batch"), _in("TxGossip._drain")
_DECODE = _any("decode_transfer", "Transaction.from_bytes")
_CHECKS = _any("get_account", "check_static", "head_context")
ITEMS: list[tuple[str, Rule]] = [
    ("admission: secp256k1 recovery", lambda f, r: (_RPC(f, r) or _GOSSIP(f, r)) and "recover_signer" in f),
    ("admission: transaction decode", lambda f, r: (_RPC(f, r) or _GOSSIP(f, r)) and _DECODE(f, r)),
    ("admission: mempool insert", lambda f, r: (_RPC(f, r) or _GOSSIP(f, r)) and "Mempool.add" in f),
    ("admission: account read, static checks", lambda f, r: (_RPC(f, r) or _GOSSIP(f, r)) and _CHECKS(f, r)),
    ("gossip send: batching, encode, broadcast", _any("TxGossip.add", "TxGossip.flush")),
    ("admission: tx hash, signature mark, journal, metrics, RPC reply", lambda f, r: _RPC(f, r) or _GOSSIP(f, r)),
    ("gossip receive: batch decode, queue", _any("TxGossip.receive", "TxGossip.receive_single")),
    ("header lookups decoding a whole stored block", _both(_in("Forks.header"), _in("Block.decode"))),
    ("follower: block body decode", _both(_in("ConsensusService._on_block"), _any("Block.decode", "decode_block"))),
    ("execution: follower verification", _in("Forks.verify", "execute_block")),
    ("execution: leader build, take from pool", _any("execute_block", "Forks.build", "Node._take_transactions",
                                                      "Mempool.ready")),
    ("commit (LevelDB batch, tree, pool update)",
     lambda f, r: "Chain.commit" in f or any("_commit_one" in x or "_commit_loop" in x for x in f)),
    ("consensus: certificates, votes, signing, header checks, journal",
     lambda f, r: any(x.startswith(("Engine.", "ThresholdScheme.")) for x in f)
     or _any("verify_and_prepare", "ConsensusService._verify", "VoteJournal.append", "Block.encode")(f, r)),
    ("HTTP (aiohttp): submissions and the bench's /status, /block polls", lambda f, r: "aiohttp" in r),
    ("peer links (QUIC: aioquic send, receive, ACKs; TCP: records, sealing), framing",
     lambda f, r: "aioquic" in r or "peer_quic" in r or "peer_tcp" in r or "p2p/peers.py" in r),
]

_FRAME = re.compile(r"^(.*) \((.*):\d+\)$")


def itemise(files: list[Path]) -> dict[str, Any]:
    """Busy samples per item (py-spy ``raw`` files: ``thread;frame;frame ... count`` lines)."""
    counts: collections.Counter[str] = collections.Counter()
    idle = 0
    for path in files:
        for line in path.read_text().splitlines():
            stack, n_text = line.rsplit(" ", 1)
            n = int(n_text)
            raw = stack.split(";")
            names = [m.group(1) if (m := _FRAME.match(x)) else x for x in raw[1:]]
            leaf = names[-1] if names else ""
            # A thread pool's _worker as the leaf waits in its queue's get (C code): idle, whichever pool.
            if leaf in ("Runner.run", "_worker"):
                idle += n
                continue
            for name, rule in ITEMS:
                if rule(names, stack):
                    counts[name] += n
                    break
            else:
                counts["other"] += n
    busy = sum(counts.values())
    return {"busy_samples": busy, "idle_samples": idle,
            "share_pct": {name: round(100 * counts[name] / busy, 2) if busy else 0.0
                          for name in [*(i[0] for i in ITEMS), "other"]}}


def run_one(path: str | None, args: argparse.Namespace, cpu_us: float | None,
            transport: str = "quic") -> dict[str, Any]:
    """One profiled network run (validators importing from ``path``; None: this checkout; links over
    ``transport``), itemised."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = Path(tempfile.mkdtemp(prefix="net-cpu-items-"))
    kw: dict[str, Any] = {"net_pyspy": (spy, str(out), args.spy_s), "net_submit_batch": args.submit_batch,
                          "net_p2p_transport": transport}
    if args.load != "max":
        kw.update(net_rate=float(args.load), net_txs=int(float(args.load) * args.paced_s))
    rep = _with_pythonpath(path, _defaults(**kw))
    items = itemise(sorted(out.glob("v*.txt")))
    shutil.rmtree(out, ignore_errors=True)
    measured = rep.get("validator_cpu_us_per_transfer")
    per = cpu_us if cpu_us is not None else measured
    items["cpu_us_per_transfer_used"] = per
    items["cpu_us_per_transfer_this_run_with_pyspy"] = measured
    items["us"] = {k: round(v * per / 100, 1) for k, v in items["share_pct"].items()} if per else None
    items["p2p_transport"] = transport
    items["run"] = {k: rep.get(k) for k in ("transfers_per_s", "proposal_to_finalization_p50_ms", "cpu_s_per_s",
                                            "complete", "load_average_before", "error")}
    return items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", default="1000", help="a paced rate in transfers/s, or max (6,000 transfers)")
    ap.add_argument("--paced-s", type=float, default=20.0)
    ap.add_argument("--spy-s", type=int, default=20, help="seconds py-spy samples from the start of the load")
    ap.add_argument("--base", default=None, help="checkout of the baseline commit (git worktree add DIR COMMIT)")
    ap.add_argument("--submit-batch", type=int, default=1, help="the client's POST /submit/batch size (1: /submit)")
    ap.add_argument("--cpu-us", default=None, help="CPU-µs per transfer per validator to scale by: NEW[,BASE]")
    ap.add_argument("--p2p-transport", choices=TRANSPORTS, default="quic", help="the new run's [p2p] transport")
    ap.add_argument("--base-p2p-transport", choices=TRANSPORTS, default="quic",
                    help="the baseline run's (with --base this checkout: the two links itemised side by side)")
    a = ap.parse_args()
    scale = [float(x) for x in a.cpu_us.split(",")] if a.cpu_us else []
    out: dict[str, Any] = {"load": a.load}
    if a.base:
        out["baseline"] = run_one(str(Path(a.base).resolve()), a, scale[1] if len(scale) > 1 else None,
                                  a.base_p2p_transport)
    out["new"] = run_one(None, a, scale[0] if scale else None, a.p2p_transport)
    if a.base and out["baseline"]["us"] and out["new"]["us"]:
        out["us_new_minus_baseline"] = {k: round(out["new"]["us"][k] - v, 1)
                                        for k, v in out["baseline"]["us"].items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
