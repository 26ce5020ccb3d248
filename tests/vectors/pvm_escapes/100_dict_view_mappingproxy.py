# expect: rejected forbidden_attribute
# view.mapping is a mappingproxy: its get()/copy() would bypass the dict-key checks.
def handler(payload):
    t = ()
    for _ in range(200000):
        t = (t,)
    return bytes(len({"a": 1}.keys().mapping.get(t, b"")))
