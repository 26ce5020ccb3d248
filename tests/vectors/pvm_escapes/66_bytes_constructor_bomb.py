# expect: halted memory_limit
def handler(payload):
    return bytes(10 ** 9)
