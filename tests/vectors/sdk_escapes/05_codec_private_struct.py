# expect: rejected private_attribute
from cowboy_sdk import codec


def handler(payload):
    return repr(codec._struct).encode()
