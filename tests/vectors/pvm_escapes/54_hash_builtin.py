# expect: rejected forbidden_name
def handler(payload):
    return str(hash("seed dependent")).encode()
