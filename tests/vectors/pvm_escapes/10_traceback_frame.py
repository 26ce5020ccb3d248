# expect: rejected dunder_attribute
# Exception tracebacks lead to frames and from there to every global.
def handler(payload):
    try:
        raise ValueError("x")
    except ValueError as e:
        frame = e.__traceback__.tb_frame
    return str(frame.f_back.f_globals).encode()
