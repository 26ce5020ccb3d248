"""Canonical encoding: the CIP-11 deterministic CBOR profile (:mod:`cowboy_node.codec.cbor`)."""

from cowboy_node.codec.cbor import ERROR_CODES, CborValue, CodecError, decode, encode, encode_uint

__all__ = ["ERROR_CODES", "CborValue", "CodecError", "decode", "encode", "encode_uint"]
