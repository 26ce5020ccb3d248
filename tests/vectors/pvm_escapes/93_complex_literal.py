# expect: rejected complex_literal
def handler(payload):
    return str(abs(3 + 4j)).encode()
