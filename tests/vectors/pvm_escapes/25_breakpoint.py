# expect: rejected forbidden_name
def handler(payload):
    breakpoint()
    return b"x"
