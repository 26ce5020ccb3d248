# expect: rejected set_literal
def handler(payload):
    return ",".join({"a", "b", "c"}).encode()
