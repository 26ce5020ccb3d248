# expect: rejected yield
def gen():
    yield 1


def handler(payload):
    return bytes(list(gen()))
