# expect: rejected forbidden_attribute
def handler(payload):
    g = (x for x in [1, 2])
    g.throw(ValueError)
    return b"x"
