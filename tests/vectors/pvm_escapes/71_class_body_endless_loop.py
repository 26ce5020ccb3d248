# expect: halted out_of_cycles
class Spin:
    while True:
        pass


def handler(payload):
    return b"x"
