"""What the validator and the runner both speak: the canonical CBOR codec, hashing and keys, wire types
(transactions, instructions, JobSpecV1), the sans-I/O CIP-11 session layer (:mod:`.transport`) and its aioquic
adapter (:mod:`.quic`), fee helpers and the HTTP API client.
"""
