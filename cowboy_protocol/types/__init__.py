"""Wire and chain types shared by both daemons: transactions and their instructions (transfer, actors,
timers, jobs, runners, governance, validator set, presence), JobSpecV1, field checks and validation errors.
"""
