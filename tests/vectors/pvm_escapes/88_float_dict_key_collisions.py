# expect: halted handler_error
def handler(payload):
    d = {1.5: "a"}
    return bytes(len(d))
