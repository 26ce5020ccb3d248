# expect: rejected underscore_name
def handler(payload):
    return str(__builtins__["eval"]("1+1")).encode()
