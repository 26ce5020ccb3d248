"""CIP-1 Autonomous Actor Scheduler (seeds/004; docs/timers.md §15), the governed ``TimerPolicy.mode = 2``.

* ``timer_layout.py`` — the ``set_timeout`` timer record, its id, the state keys and the tier geometry;
* ``queue.py``    — the three-tier calendar queue (block ring buffer, epoch queue, overflow set), epoch
  maintenance and the due backlog;
* ``bidding.py``  — the Gas Bidding Agent call: context, bid parsing, typed outcomes;
* ``weights.py``  — per-actor priority weights (fixed point, exponential decay, clamp, starvation floor);
* ``timeout.py``  — ``set_timeout`` / ``cancel_timeout`` (the host calls' state side);
* ``deliver.py``  — the End-of-Block step: maintenance, collection, bids, ordering, execution under
  ``TIMER_PROCESSING_BUDGET_CYCLES``.

Everything is pure and deterministic: no clock, randomness or I/O; every order is a key order or an explicit
sort on integers and bytes.
"""
