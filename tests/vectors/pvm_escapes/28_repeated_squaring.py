# expect: halted int_too_large
def handler(payload):
    x = 3
    while True:
        x = x * x
