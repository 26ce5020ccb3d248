"""Frozen dataclasses for everything the chain stores, hashes or signs."""
