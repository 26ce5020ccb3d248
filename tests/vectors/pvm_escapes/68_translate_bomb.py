# expect: halted memory_limit
def handler(payload):
    return ("a" * 1000).translate({97: "b" * 100000}).encode()
