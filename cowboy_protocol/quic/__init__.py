"""The aioquic adapter of CIP-11: frames over one QUIC stream, the TLS channel binding, certificates,
admission limits; the only place of cowboy_protocol that does network I/O (DESIGN.md §3 rule 3)."""
