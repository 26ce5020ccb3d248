# expect: halted memory_limit
def handler(payload):
    return format(1, ">1000000000").encode()
