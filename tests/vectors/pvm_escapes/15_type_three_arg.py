# expect: rejected forbidden_name
# type(name, bases, dict) creates classes with arbitrary dunders.
def handler(payload):
    Evil = type("Evil", (), {"__del__": lambda self: None})
    return str(Evil()).encode()
