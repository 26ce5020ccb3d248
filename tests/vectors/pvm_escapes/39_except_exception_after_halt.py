# expect: halted recursion_limit
# Halts are BaseExceptions: "except Exception" does not catch them.
def down(n):
    return down(n + 1)


def handler(payload):
    try:
        down(0)
    except Exception:
        return b"survived"
    return b"x"
