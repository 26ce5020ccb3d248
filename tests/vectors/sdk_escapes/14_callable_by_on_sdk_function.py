# expect: halted handler_error
import cowboy_sdk


def handler(payload):
    deco = cowboy_sdk.callable_by(cowboy_sdk.OWNER)
    deco(cowboy_sdk.ActorRef.send)
    return b"tagged"
