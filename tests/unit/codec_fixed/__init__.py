"""Tests of cowboy_protocol.codec.fixed (fast pieces of the canonical codec)."""
