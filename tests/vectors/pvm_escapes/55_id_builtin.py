# expect: rejected forbidden_name
def handler(payload):
    return str(id(payload)).encode()
