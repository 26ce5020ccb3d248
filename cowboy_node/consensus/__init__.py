"""Consensus below the node: the sans-I/O threshold-Simplex engine (:mod:`.simplex`), header checks, the
beacon, the vote journal, forks over notarized blocks, evidence and the sync messages.
"""
