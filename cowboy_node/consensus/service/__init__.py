"""The consensus service's sans-I/O parts (issue 32), along the lines of commonware's simplex actors.

- :mod:`.voter` — the voter driver: the Simplex engine, the vote journal, the double-sign guard, and acting on the
  engine's outputs (votes out through the outbox, certificates counted, faults recorded);
- :mod:`.application` — the application pipeline: build, verify and commit blocks over
  :class:`~cowboy_node.consensus.forks.Forks`, with the bodies it holds (:mod:`.bodies`);
- :mod:`.resolver` — the resolver: status announcements, the sync channel, catching up and moving the engine's
  floor over what block sync committed.

They read no clock, start no thread or task and log nothing themselves: the clock, the runtime (timers, tasks,
the builder thread, waking the loop), the peer layer, block sync, the log and the metrics come in through the
Protocols of :mod:`.ports`. ``cowboy_node/node/consensus_service.py`` is the asyncio shell that builds the three with
constructor arguments and adapts the runtime.
"""
