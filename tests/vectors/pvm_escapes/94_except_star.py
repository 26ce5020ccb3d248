# expect: rejected except_star
def handler(payload):
    try:
        pass
    except* ValueError:
        pass
    return b"x"
