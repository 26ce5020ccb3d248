# expect: halted handler_error
import json


def handler(payload):
    del json.loads
    return b"x"
