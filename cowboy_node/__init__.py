"""The Cowboy validator daemon (``cowboy-node``): chain state, block production and execution, consensus, the
peer and runner transports, the HTTP API. Packages in layers, lowest first (DESIGN.md §3,
``tests/unit/project/test_layering.py``): ``types``/``crypto`` → ``state`` → ``execution`` → ``chain`` →
``consensus`` → ``observability`` → ``snapshot`` → ``p2p``/``transport``/``rpc`` → ``node`` → ``cli``.
"""
