# expect: halted out_of_cycles
def handler(payload):
    return bytes([x for x in iter(int, 1)])
