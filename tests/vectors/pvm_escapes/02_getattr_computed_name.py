# expect: rejected forbidden_name
# getattr with a name built at run time to dodge the static attribute check.
def handler(payload):
    name = "__cl" + "ass__"
    return str(getattr((), name)).encode()
