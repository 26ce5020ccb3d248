"""Cryptographic primitives of the node.

- :mod:`.keccak` — Keccak-256 (Ethereum's, not SHA3-256).
- :mod:`.secp256k1` — recoverable ECDSA signatures and EVM-style 20-byte addresses.
- :mod:`.address` — EIP-55 checksummed address text.
- :mod:`.ed25519` — validator identity / block signatures.
- :mod:`.bls` — BLS12-381 MinSig signatures (CIP-11 scheme_id 0x01).
- :mod:`.threshold` — threshold BLS (Shamir + Lagrange in the exponent) for the beacon.

Submodules are imported explicitly (``from cowboy_node.crypto import bls``); nothing is
re-exported here, so importing one does not load every backend.
"""
