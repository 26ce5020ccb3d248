# expect: halted handler_error
# The real cowboy_sdk.runtime module imports sys, json and importlib; the view exposes functions only.
from cowboy_sdk import runtime


def handler(payload):
    return repr(runtime.sys.modules).encode()
