# expect: halted handler_error
# Hashing a 200k-deep tuple recurses in C without a limit: it would crash the process.
# Tuples are not allowed as dict keys in the PVM (TypeError).
def handler(payload):
    t = ()
    for _ in range(200000):
        t = (t,)
    d = {t: 1}
    return bytes(len(d))
