"""Transfers commit exactly what they committed before the fast paths (A/B against commit 8cb54ba).

``transfer_corpus.run_corpus`` was run on 8cb54ba (a worktree of that commit on ``PYTHONPATH``) and its output is
pinned here, on the producer and on a follower that re-executes the blocks and re-checks every signature:

* what does not depend on the state tree: every header field execution computes except the state root (tx and
  receipts roots, cycles, cells, basefees) and byte-identical state values, receipts, tx index and event index;
* what does: block hashes, the state root and the whole store. These hold while the state-root definition is
  8cb54ba's; a change of that definition (issue 20 item 2, with its own vectors) re-pins only this part, by
  running ``run_corpus`` on the commit before the change as described in ``transfer_corpus.py``.
"""

from __future__ import annotations

from tests.unit.chain.transfer_corpus import run_corpus

HEADERS_8CB54BA = [  # [tx_root, receipts_root, cycles_used, cells_used, cycle_basefee, cell_basefee]
    ["5da429e5b02ff5e6a3feecfb7390143bc8f26486d10433e49fcaeb8f57e12853",
     "7d3d11c83b404737746f682987cc2cd98a29e0fc3eca1c826398dedcd062a480", 2_171_000, 61_387, 100_000, 100_000],
    ["1c31b1f5775729cd4dc226c6ba612f3cf363b2b150b6e714d174b4b8da1adfb2",
     "a01c2191f6858908dc55cd7f365a032d7cfb52660b8c184c9cf862cc204dd532", 1_824_000, 51_917, 99_072, 98_975],
    ["317fba7c993d1ae1c4a98a73c364febbfa20c56943a34bb319c8295f79e487cb",
     "201b4715513ddf753432237a8ce1d733490961a4793ddf132f5281e969d9a88a", 0, 0, 98_135, 97_958],
]
LOGICAL_DIGEST_8CB54BA = "1edbac5df6c3010f5fc13e34b9f2edfaaab6778504782f9ab81991139ccbbab2"
BLOCK_HASHES_8CB54BA = ["4c360ad500ebf8f8c286653e746adfe160cb439fe4adedd8d3f09d0f9e67d353",
                        "a4e70a053fe569831410059fa248c7b05d751a6345ea238aaaf4940304bf5d93",
                        "35097d2abe5d5e3aabc4850bd65b610f0da286912d3639916402a28d52242558"]
STATE_ROOT_8CB54BA = "8c21d0c9f8abf405ec83c8836a2167ac1e0dcf13d3aa93652c139bb5bcc00164"
STORE_DIGEST_8CB54BA = "58ccc06568a24b6695b9c2858f8acf336c9cd43bd07042da0aa36f116e76f9e1"


def test_the_corpus_computes_the_roots_gas_state_receipts_and_indexes_of_8cb54ba() -> None:
    out = run_corpus()
    assert out["headers"] == HEADERS_8CB54BA
    assert out["logical_digest"] == out["follower_logical_digest"] == LOGICAL_DIGEST_8CB54BA


def test_the_corpus_commits_the_block_hashes_state_root_and_store_of_8cb54ba() -> None:
    out = run_corpus()
    assert out["block_hashes"] == BLOCK_HASHES_8CB54BA
    assert out["state_root"] == STATE_ROOT_8CB54BA
    assert out["store_digest"] == out["follower_store_digest"] == STORE_DIGEST_8CB54BA


def test_the_corpus_exercises_the_failures_and_rejections_it_claims() -> None:
    out = run_corpus()
    first = out["outcomes"][0]  # type: ignore[index]
    assert first[:8] == ["ok", "ok", "ok", "insufficient_balance", "ok", "ok", "out_of_cells", "out_of_cycles"]
    assert out["left_out"] == [["nonce_too_high", "bad_signature"], [], []]
    assert [len(o) for o in out["outcomes"]] == [181, 152, 0]  # type: ignore[union-attr]
