"""The Cowboy runner daemon (``cowboy-runner``): registers on chain, keeps CIP-11 sessions to its validators,
verifies and executes assigned jobs (:mod:`.executors`) and returns runner-signed results; imports
``cowboy_protocol`` only.
"""
