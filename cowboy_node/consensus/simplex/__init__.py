"""Threshold Simplex consensus (after commonware's ``consensus/src/simplex``), sans-I/O.

- :mod:`.types` — proposals, votes, certificates and their deterministic CBOR bytes.
- :mod:`.scheme` — the signing scheme the engine uses (BLS12-381 threshold: vote partial + seed partial).
- :mod:`.elector` — leader election (round-robin, or random from the previous round's seed).
- :mod:`.engine` — the state machine: ``receive(sender, message, now)`` / ``tick(now)`` → outputs.

Not wired into the node yet (see ``docs/consensus.md``).
"""
