# expect: rejected forbidden_name
# Set iteration order depends on the hash seed.
def handler(payload):
    return ",".join(set(["a", "b", "c"])).encode()
