# expect: halted memory_limit
def handler(payload):
    return b"x" * 10 ** 9
