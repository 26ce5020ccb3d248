"""Runner Registry (system actor 0x…01): registrations, the append-only active-runner array, unbonding."""
