# expect: rejected dunder_attribute
def handler(payload):
    return handler.__code__.co_code
