"""The End-of-Block steps, one module each, in the order of seeds/000's EOB diagram.

``deliver_timers`` → ``resolve_offchain`` → ``execute_mailbox`` → ``fees_and_burn``
→ ``system_hooks`` → ``commit``; ``execution/end_of_block.py`` lists them.
"""
