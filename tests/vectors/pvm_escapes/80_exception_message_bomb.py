# expect: halted handler_error
# The error message is rendered with a small fixed budget, never a 10**12-byte repr.
def handler(payload):
    raise ValueError([b"x" * 1000000] * 1000000)
