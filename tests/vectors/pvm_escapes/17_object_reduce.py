# expect: rejected dunder_attribute
def handler(payload):
    return str(payload.__reduce_ex__(2)).encode()
