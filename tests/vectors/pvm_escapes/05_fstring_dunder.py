# expect: rejected dunder_attribute
# f-string replacement fields are ordinary expressions: the policy sees them.
def handler(payload):
    return f"{payload.__class__.__base__}".encode()
