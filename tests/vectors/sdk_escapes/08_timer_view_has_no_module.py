# expect: halted handler_error
from cowboy_sdk import timer


def handler(payload):
    return repr(timer.codec).encode()
