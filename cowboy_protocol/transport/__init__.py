"""CIP-11's sans-I/O core: enums, frames and their framing, signed preimages, public keys, the runner and
validator session state machines, the Mode A subset. Bytes and ``now`` in, frames and events out: no clock,
socket or asyncio (checked by ``tests/unit/project/test_layering.py``); the aioquic adapter is
:mod:`cowboy_protocol.quic`.
"""
