"""Canonical encoding: the CIP-11 deterministic CBOR profile (:mod:`cowboy_protocol.codec.cbor`)."""

from cowboy_protocol.codec.cbor import ERROR_CODES, CborValue, CodecError, decode, encode, encode_uint

__all__ = ["ERROR_CODES", "CborValue", "CodecError", "decode", "encode", "encode_uint"]
