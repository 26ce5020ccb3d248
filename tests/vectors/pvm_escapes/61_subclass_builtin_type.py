# expect: halted handler_error
# Subclassing list would give an unguarded constructor.
class Big(list):
    pass


def handler(payload):
    return bytes(len(Big(range(10 ** 9))))
