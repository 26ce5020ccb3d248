# expect: halted handler_error
# Decorators set attributes on their argument: a shared SDK function must not be tagged.
import cowboy_sdk


def handler(payload):
    cowboy_sdk.public(cowboy_sdk.ActorRef.call)
    return b"tagged"
