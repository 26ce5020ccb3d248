"""The validator peer layer: Ed25519-authenticated QUIC links between validators, their frames and
congestion control, and the signed presence and endpoint gossip (DESIGN.md §3 ``p2p/``)."""
