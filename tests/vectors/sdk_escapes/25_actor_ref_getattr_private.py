# expect: rejected private_attribute
import cowboy_sdk


def handler(payload):
    return repr(cowboy_sdk.ActorRef(b"\x01" * 20)._codec).encode()
