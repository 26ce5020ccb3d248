# expect: halted out_of_cycles
# CPython's filter() would skip falsy items inside C forever without returning.
def handler(payload):
    return bytes([next(filter(None, iter(int, 1)))])
