# expect: halted handler_error
from cowboy_sdk import runtime


def handler(payload):
    return runtime.json.decoder.re.compile("x").pattern.encode()
