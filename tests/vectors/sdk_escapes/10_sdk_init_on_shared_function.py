# expect: halted handler_error
# The SDK-installed __init__ sets attributes with object.__setattr__: never on a non-instance.
import cowboy_sdk
from cowboy_sdk import actor


@actor
class A:
    def ping(self, payload):
        return payload


def handler(payload):
    A.__init__(cowboy_sdk.ActorRef.call)
    return b"mutated a shared SDK function"
