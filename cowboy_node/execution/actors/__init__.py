"""Actors: deploy and call Python actors in the PVM, the ``pvm_host`` host API, actor-to-actor calls.

``actor_record`` — the ActorRecord and the actor address; ``actor_state`` — state layout;
``codecache`` — compiled-code cache; ``host`` — the ``pvm_host`` object one frame sees;
``invoke`` — run a handler (transactions, nested calls, timer fires, mailbox messages,
read-only RPC calls); ``executor`` — the DeployActor / CallActor executors.
See docs/actors.md.
"""
