# expect: halted handler_error
# codec is a two-function view, not the module (which holds struct, errors...).
from cowboy_sdk import codec


def handler(payload):
    return repr(codec.CodecError).encode()
