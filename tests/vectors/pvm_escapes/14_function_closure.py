# expect: rejected dunder_attribute
def make():
    secret = 1

    def inner():
        return secret

    return inner


def handler(payload):
    return str(make().__closure__[0].cell_contents).encode()
