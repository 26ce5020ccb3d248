# expect: halted recursion_limit
import json


def handler(payload):
    return str(json.loads("[" * 100000 + "]" * 100000)).encode()
