"""candidates_snapshot_root (CIP-11 §9.2): leaf layout (project choice) and the binary tree rules, with goldens."""

from __future__ import annotations

import pytest

from cowboy_node.execution.jobs.snapshot_root import candidate_leaf, candidates_snapshot_root, root_of_leaves
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.params import RunnerConfig
from tests.unit.execution.jobs.test_selection_support import runner

E18 = 10**18
LEAF0_PREIMAGE = (
    "636f77626f792d63616e646964617465732d6c6561662d7631"   # "cowboy-candidates-leaf-v1"
    "00000000"                                           # index_be4 = 0
    + "01" * 20 +                                        # address20
    "00000000000000000de0b6b3a7640000"                   # effective_stake_be16 = 1e18
    "0000000ba43b7400"                                   # reputation_x1e9_be8 = 50e9
    "000000000000000009b6e64a8ec60000"                   # base_weight_be16 = 7e17
)
LEAVES = [
    "e2a3b3b4cac5345f423dba6ec113fcc29b06402ec565818cd37fcd4542132803",
    "d24ff2c00819c7a43f3fbffd4c6e463686b962c36b7c025b0f078809f916ae7c",
    "db3ddb76dfaee142ce957834853361daab4f4863e82503fa22a59e3820d3f0a7",
    "06a0e69a7ec68b56117d4298a467da8b3d5dd699e9b8364603ab64356232b30d",
    "cbabf9356e3dcc8743693be8dc8372c9d291b519d49840e20c52bf8b675e0fe5",
]
ROOTS = {
    0: "d15e504c62e0d8e151bf3d894baa33bcf6779d3f2da34df110a5da3bdbba3795",
    1: LEAVES[0],
    2: "1c4223c425ba037e835823fc21132ab8d1cb694bfde547315325c45e7da64f3d",
    3: "05ad4cd5ba666028b1e216b1021ae65fa74d4bf80feff361508c838943be9720",
    5: "a16871d1195aed55c8165c667ab18329634005a4d4f3d020280194e2551a030c",
}
INNER = b"cowboy-candidates-inner-v1"


def leaf(k: int) -> bytes:
    """Leaf k of the golden set: index k, address (k+1)×20, stake (k+1)e18, rep 50e9 + k, weight 7(k+1)e17."""
    return candidate_leaf(k, bytes([k + 1]) * 20, (k + 1) * E18, 50_000_000_000 + k, (k + 1) * 7 * 10**17)


def test_leaf_golden() -> None:
    assert keccak256(bytes.fromhex(LEAF0_PREIMAGE)).hex() == LEAVES[0]
    assert [leaf(k).hex() for k in range(5)] == LEAVES


@pytest.mark.parametrize("n", sorted(ROOTS))
def test_root_golden(n: int) -> None:
    assert root_of_leaves([leaf(k) for k in range(n)]).hex() == ROOTS[n]


def test_tree_rules_empty_one_and_odd_level_duplication() -> None:
    ls = [bytes.fromhex(x) for x in LEAVES]
    assert ROOTS[0] == keccak256(b"cowboy-candidates-empty-v1").hex()
    assert root_of_leaves(ls[:1]) == ls[0]  # one leaf: the root is the leaf itself, not hashed again
    inner = lambda a, b: keccak256(INNER + a + b)  # noqa: E731
    assert root_of_leaves(ls[:3]) == inner(inner(ls[0], ls[1]), inner(ls[2], ls[2]))
    left = inner(inner(ls[0], ls[1]), inner(ls[2], ls[3]))
    right = inner(inner(ls[4], ls[4]), inner(ls[4], ls[4]))
    assert root_of_leaves(ls) == inner(left, right)


def test_snapshot_root_of_runner_records_uses_snapshot_position_and_paired_weights() -> None:
    # registry indices 7 and 3; leaf indices are the positions 0 and 1 in the address-ordered snapshot
    rs = [runner(0x01, 7, stake=3 * E18, rep=100_000_000_000), runner(0x02, 3, stake=E18, rep=64_000_000_000)]
    expected = root_of_leaves([candidate_leaf(0, rs[0].address, 3 * E18, 100_000_000_000, 3 * E18),
                               candidate_leaf(1, rs[1].address, E18, 64_000_000_000, 8 * E18 // 10)])
    assert candidates_snapshot_root(rs, RunnerConfig()) == expected
    assert candidates_snapshot_root(rs, RunnerConfig(), [3 * E18, 8 * E18 // 10]) == expected
    assert candidates_snapshot_root(list(reversed(rs)), RunnerConfig()) != expected  # order is committed


def test_leaf_fields_are_range_checked() -> None:
    with pytest.raises(ValueError):
        candidate_leaf(0, bytes(19), 0, 0, 0)
    with pytest.raises(ValueError):
        candidate_leaf(2**32, bytes(20), 0, 0, 0)
    with pytest.raises(ValueError):
        candidate_leaf(0, bytes(20), 2**128, 0, 0)
