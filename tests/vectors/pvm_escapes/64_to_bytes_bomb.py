# expect: halted memory_limit
def handler(payload):
    return (1).to_bytes(10 ** 9, "big")
