"""The node side of CIP-11: the runners' QUIC sessions (``service``), local presence, the push of
``JobAssignment`` frames after commit and the early-reveal hold, with optional QUIC worker processes (:mod:`.workers`).
The validator peer layer is :mod:`cowboy_node.p2p`.
"""
