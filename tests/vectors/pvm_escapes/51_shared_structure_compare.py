# expect: halted out_of_cycles
# Three levels of 1000x sharing: comparing two equal copies is 10**9 C steps.
def handler(payload):
    a1 = (0,) * 1000
    b1 = tuple([0] * 1000)
    a3 = ((a1,) * 1000,) * 1000
    b3 = ((b1,) * 1000,) * 1000
    return b"same" if a3 == b3 else b"different"
