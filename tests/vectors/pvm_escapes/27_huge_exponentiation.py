# expect: halted int_too_large
def handler(payload):
    n = 10 ** 6
    return str(2 ** n).encode()
