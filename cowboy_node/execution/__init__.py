"""The state transition, pure and deterministic (DESIGN.md §3 rule 1): ``apply_block`` over explicit inputs,
transactions and fees (CIP-3), actors and the PVM, timers (CIP-5) and the CIP-1 scheduler, the runner registry
and off-chain jobs (CIP-2/CIP-11), and the End-of-Block steps (:mod:`.eob`). No clock, randomness, I/O or
environment.
"""
