# expect: halted memory_limit
# A format width of a billion characters.
def handler(payload):
    width = 10 ** 9
    return f"{1:>{width}}".encode()
