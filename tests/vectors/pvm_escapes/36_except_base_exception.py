# expect: rejected catch_base_exception
def handler(payload):
    try:
        while True:
            pass
    except BaseException:
        return b"survived"
