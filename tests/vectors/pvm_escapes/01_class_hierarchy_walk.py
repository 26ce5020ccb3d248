# expect: rejected dunder_attribute
# Classic escape: walk from a tuple to object, then list every loaded class.
def handler(payload):
    classes = ().__class__.__bases__[0].__subclasses__()
    return str(classes).encode()
