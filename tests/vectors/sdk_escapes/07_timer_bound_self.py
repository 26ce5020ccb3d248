# expect: rejected dunder_attribute
from cowboy_sdk import timer


def handler(payload):
    return repr(timer.schedule.__self__).encode()
