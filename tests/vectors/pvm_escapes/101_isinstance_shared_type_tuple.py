# expect: halted handler_error
# 8 levels of 200-way shared type tuples: 200**8 isinstance() steps inside C.
def handler(payload):
    spec = (int,) * 200
    for _ in range(7):
        spec = (spec,) * 200
    return b"yes" if isinstance(1, spec) else b"no"
