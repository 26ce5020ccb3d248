# expect: halted recursion_limit
def down(n):
    return down(n + 1) + 1


def handler(payload):
    return bytes([down(0)])
