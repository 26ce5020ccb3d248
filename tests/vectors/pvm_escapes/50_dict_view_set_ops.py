# expect: halted handler_error
# dict views support set operators, which build real (seed-ordered) sets.
def handler(payload):
    a = {"x": 1, "y": 2, "z": 3}
    b = {"y": 0, "z": 0, "w": 0}
    return ",".join(a.keys() & b.keys()).encode()
