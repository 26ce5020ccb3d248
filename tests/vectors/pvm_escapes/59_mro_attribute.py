# expect: rejected forbidden_attribute
def handler(payload):
    return str(int.mro()).encode()
