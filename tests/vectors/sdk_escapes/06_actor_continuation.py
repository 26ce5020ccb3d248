# expect: halted handler_error
# The real actor decorator object carries the continuation compiler (inspect, async frames).
from cowboy_sdk import actor


def handler(payload):
    return repr(actor.continuation).encode()
