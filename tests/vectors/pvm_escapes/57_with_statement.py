# expect: rejected with_statement
def handler(payload):
    with payload:
        pass
    return b"x"
