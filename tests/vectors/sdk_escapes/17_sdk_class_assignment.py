# expect: halted handler_error
import cowboy_sdk


def handler(payload):
    cowboy_sdk.ActorRef.call = None
    return b"replaced"
