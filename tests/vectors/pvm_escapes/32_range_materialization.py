# expect: halted memory_limit
def handler(payload):
    return bytes(len(list(range(10 ** 9))))
