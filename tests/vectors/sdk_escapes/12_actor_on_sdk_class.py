# expect: halted handler_error
# @actor rewrites the class it decorates: refuse anything the actor did not define.
import cowboy_sdk


def handler(payload):
    cowboy_sdk.actor(cowboy_sdk.ActorRef)
    return b"rewrote ActorRef"
