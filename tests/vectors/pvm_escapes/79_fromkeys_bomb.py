# expect: halted memory_limit
def handler(payload):
    return bytes(len(dict.fromkeys(range(10 ** 9))))
