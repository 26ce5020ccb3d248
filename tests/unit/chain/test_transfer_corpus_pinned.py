"""Transfers commit exactly what they committed before the fast paths (A/B against commit 8cb54ba).

``transfer_corpus.run_corpus`` was run on 8cb54ba (a worktree of that commit on ``PYTHONPATH``) and its output is
pinned here: the same transfers must give the same block hashes (so the same state, receipts and tx roots, gas
and fees), the same state root, and byte-identical stores (blocks, receipts, tx index, event index, state and
tree nodes), on the producer and on a follower that re-executes and re-checks every signature.
"""

from __future__ import annotations

from tests.unit.chain.transfer_corpus import run_corpus

PINNED_8CB54BA = {
    "block_hashes": ["4c360ad500ebf8f8c286653e746adfe160cb439fe4adedd8d3f09d0f9e67d353",
                     "a4e70a053fe569831410059fa248c7b05d751a6345ea238aaaf4940304bf5d93",
                     "35097d2abe5d5e3aabc4850bd65b610f0da286912d3639916402a28d52242558"],
    "state_root": "8c21d0c9f8abf405ec83c8836a2167ac1e0dcf13d3aa93652c139bb5bcc00164",
    "store_digest": "58ccc06568a24b6695b9c2858f8acf336c9cd43bd07042da0aa36f116e76f9e1",
}


def test_the_corpus_commits_the_blocks_and_store_of_8cb54ba() -> None:
    out = run_corpus()
    assert out["block_hashes"] == PINNED_8CB54BA["block_hashes"]
    assert out["state_root"] == PINNED_8CB54BA["state_root"]
    assert out["store_digest"] == PINNED_8CB54BA["store_digest"]
    assert out["follower_store_digest"] == PINNED_8CB54BA["store_digest"]


def test_the_corpus_exercises_the_failures_and_rejections_it_claims() -> None:
    out = run_corpus()
    first = out["outcomes"][0]  # type: ignore[index]
    assert first[:8] == ["ok", "ok", "ok", "insufficient_balance", "ok", "ok", "out_of_cells", "out_of_cycles"]
    assert out["left_out"] == [["nonce_too_high", "bad_signature"], [], []]
    assert [len(o) for o in out["outcomes"]] == [181, 152, 0]  # type: ignore[union-attr]
