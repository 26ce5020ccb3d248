# expect: halted handler_error
# @actor on a subclass of an SDK class walks the SDK class's namespace: it must not change it.
import cowboy_sdk


@cowboy_sdk.actor
class Sneaky(cowboy_sdk.ActorRef):
    def ping(self, payload):
        return payload


def handler(payload):
    return b"decorated"
