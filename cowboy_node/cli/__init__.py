"""The ``cowboy-node`` command line: ``run``/``init``/``testnet`` and the client commands (status, keys, tx,
query, actor, job, runner, governance, verify, watch) that talk to a node's HTTP API; shared helpers in
:mod:`cowboy_node.cli.common`.
"""
