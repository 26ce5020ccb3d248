# expect: rejected private_attribute
def handler(payload):
    return payload._private
