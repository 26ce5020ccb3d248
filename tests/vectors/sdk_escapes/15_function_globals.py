# expect: rejected dunder_attribute
import cowboy_sdk


def handler(payload):
    return repr(cowboy_sdk.ActorRef.call.__globals__["runtime"]).encode()
