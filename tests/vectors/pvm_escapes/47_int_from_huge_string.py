# expect: halted int_too_large
def handler(payload):
    return str(int("9" * 10 ** 6)).encode()
