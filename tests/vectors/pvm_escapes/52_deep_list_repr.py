# expect: halted recursion_limit
def handler(payload):
    deep = []
    for _ in range(100000):
        deep = [deep]
    return str(deep).encode()
