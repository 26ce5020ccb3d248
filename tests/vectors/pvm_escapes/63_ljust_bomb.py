# expect: halted memory_limit
def handler(payload):
    return "x".ljust(10 ** 9).encode()
