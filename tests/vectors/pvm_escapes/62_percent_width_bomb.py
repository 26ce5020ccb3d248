# expect: halted memory_limit
def handler(payload):
    return ("%1000000000d" % 1).encode()  # noqa: UP031
