# expect: halted handler_error
from cowboy_sdk import runtime


def evil(key):
    return b"forged"


def handler(payload):
    runtime.get_state = evil
    return b"replaced"
