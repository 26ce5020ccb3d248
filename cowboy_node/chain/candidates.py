"""How many mempool transactions a proposer offers to the block it builds.

Every transaction included in a block is charged at least ``TX_BASE_CYCLES`` (its intrinsic cost), so a block
holds at most ``block_max_cycles // TX_BASE_CYCLES`` transactions whatever they are. Offering more candidates
than that only makes ``build_block`` try, and reject as ``block_full``, the surplus (≈ 30 % of a full
transfer block's execution time when the pool held 10,000). A candidate past the bound could only have been
included if enough earlier ones were rejected for another reason; the proposer's choice of candidates is its
own policy (no consensus rule), and what it builds is verified the same way.
"""

from __future__ import annotations

from cowboy_node.chain.admission import head_context
from cowboy_node.chain.chain import Chain
from cowboy_node.execution.fees import TX_BASE_CYCLES


def candidate_limit(chain: Chain, max_block_txs: int) -> int:
    """At most ``max_block_txs``, and no more than the head's cycle cap lets a block include."""
    cap = head_context(chain).ctx.basefee_config.block_max_cycles // TX_BASE_CYCLES
    return max(1, min(max_block_txs, cap))
