# expect: rejected import_not_allowed
import os


def handler(payload):
    return os.popen("id").read().encode()
