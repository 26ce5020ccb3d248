# expect: halted int_too_large
def handler(payload):
    return str(1 << 10 ** 9).encode()
