# expect: rejected forbidden_name
def handler(payload):
    return open("/etc/passwd", "rb").read()
