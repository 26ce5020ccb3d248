# expect: rejected forbidden_attribute
# Same walk starting from an object that would expose tb_frame without dunders.
def handler(payload):
    try:
        raise ValueError("x")
    except ValueError as e:
        tb = e.args
    return str(tb.tb_frame).encode()
