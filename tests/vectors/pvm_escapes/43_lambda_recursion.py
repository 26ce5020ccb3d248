# expect: halted recursion_limit
def handler(payload):
    f = lambda n: f(n + 1)  # noqa: E731
    return bytes([f(0)])
