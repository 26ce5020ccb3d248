# expect: halted handler_error
# isinstance() with a deeply nested tuple recurses in C.
def handler(payload):
    spec = int
    for _ in range(100000):
        spec = (spec,)
    return b"yes" if isinstance(1, spec) else b"no"
