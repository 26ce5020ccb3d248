# expect: halted recursion_limit
# CPython would raise RecursionError at a depth that depends on the host's stack.
def handler(payload):
    a = []
    b = []
    for _ in range(100000):
        a = [a]
        b = [b]
    return b"same" if a == b else b"different"
