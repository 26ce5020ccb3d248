# expect: rejected import_not_allowed
from sys import modules


def handler(payload):
    return str(modules).encode()
