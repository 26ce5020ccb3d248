"""The chain: genesis, the block store and its commit (undo, rollback, pruning), transaction admission and the
mempool with its journal, and the signature pool that recovers signers in worker processes.
"""
