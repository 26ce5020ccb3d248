# expect: rejected dunder_attribute
def handler(payload):
    return str(handler.__globals__["__builtins__"]).encode()
