# expect: halted recursion_limit
def key(x):
    return key(x) + 1


def handler(payload):
    return bytes(sorted([3, 1, 2], key=key))
