# expect: rejected forbidden_name
def handler(payload):
    exec("import os")
    return b"x"
