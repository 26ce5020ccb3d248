# expect: halted memory_limit
def handler(payload):
    target = []
    target[0:0] = range(10 ** 9)
    return bytes(len(target))
