# expect: halted memory_limit
def handler(payload):
    big = [0] * 10 ** 8
    return bytes(len(big))
