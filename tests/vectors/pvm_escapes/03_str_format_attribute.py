# expect: rejected forbidden_attribute
# str.format fields can walk attributes: "{0.__class__.__mro__}".
def handler(payload):
    return "{0.__class__.__mro__}".format(payload).encode()  # noqa: UP030, UP032
