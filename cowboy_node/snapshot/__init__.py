"""State snapshots (issue 34 §1): the state at a finalized height, cut into chunks each verifiable on its own
against that height's finalized state root (``state/slots.py``), and their atomic installation into an empty data
directory. Formats: docs/protocol.md "State snapshots"; operation: docs/operations.md §15.3."""
