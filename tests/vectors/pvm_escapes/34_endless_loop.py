# expect: halted out_of_cycles
def handler(payload):
    while True:
        pass
