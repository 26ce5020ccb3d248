"""The composition root: configuration, keys and home files, assembly of every part of the node, start-up
and the long-running services (consensus, sync, state sync, snapshots, gossip) that tie them together.
"""
