# expect: rejected forbidden_attribute
def handler(payload):
    return "{x.__class__}".format_map({"x": payload}).encode()
