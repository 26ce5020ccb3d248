"""Hashing and signatures both daemons use: Keccak-256, secp256k1 (recoverable, EVM-style addresses), Ed25519
and address parsing/EIP-55 printing.
"""
