# expect: rejected underscore_name
def handler(payload):
    return str(__import__("os")).encode()
