"""QUIC termination in worker processes (``[quic] workers = N``, N > 1; design in docs/transport.md).

- :mod:`.ipc` — the local channel's message codec (sans-I/O);
- :mod:`.worker` — the worker process: a QUIC+TLS server on an inherited UDP socket that relays each
  connection's open / frames / close to the validator process and sends what it is told to;
- :mod:`.relay` — the validator-process end of one worker's channel: a ``FrameConnection`` per relayed
  connection, so the unchanged session code of ``service.py`` handles them;
- :mod:`.pool` — the supervisor: the ``SO_REUSEPORT`` socket group it keeps open, worker start/restart, and
  the adapter counters summed over workers.
"""
