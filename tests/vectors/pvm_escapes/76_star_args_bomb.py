# expect: halted memory_limit
def count(*args):
    return len(args)


def handler(payload):
    return bytes(count(*range(10 ** 9)))
