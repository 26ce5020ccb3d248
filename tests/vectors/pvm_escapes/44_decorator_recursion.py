# expect: halted recursion_limit
def deco(fn):
    return deco(fn)


@deco
def victim():
    return 1


def handler(payload):
    return b"x"
