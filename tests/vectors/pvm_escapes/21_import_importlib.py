# expect: rejected import_not_allowed
def handler(payload):
    import importlib
    return str(importlib.import_module("os")).encode()
