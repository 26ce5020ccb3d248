# expect: halted memory_limit
def handler(payload):
    first, *rest = range(10 ** 9)
    return bytes([first, len(rest)])
