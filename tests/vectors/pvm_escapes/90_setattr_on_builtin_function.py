# expect: halted handler_error
def handler(payload):
    len.cache = {}
    return b"x"
