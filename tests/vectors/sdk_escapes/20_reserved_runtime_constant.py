# expect: halted handler_error
# Module constants (RESERVED_KEYS is a set: iterating it depends on the hash seed) are not exposed.
from cowboy_sdk import runtime


def handler(payload):
    return repr(list(runtime.RESERVED_KEYS)).encode()
