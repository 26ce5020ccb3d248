# expect: rejected forbidden_name
def handler(payload):
    g = globals()
    return str(vars(g)).encode()
