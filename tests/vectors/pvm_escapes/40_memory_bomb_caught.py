# expect: halted memory_limit
def handler(payload):
    try:
        blob = b"x" * 10 ** 9
    except Exception:
        return b"survived"
    return blob
