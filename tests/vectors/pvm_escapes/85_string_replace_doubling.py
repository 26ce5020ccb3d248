# expect: halted memory_limit
def handler(payload):
    s = "a" * 5000000
    while True:
        s = s.replace("a", "aa")
