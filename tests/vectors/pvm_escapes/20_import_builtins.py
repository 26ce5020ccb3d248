# expect: rejected import_not_allowed
import builtins


def handler(payload):
    return builtins.open("/etc/passwd", "rb").read()
