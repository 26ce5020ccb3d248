# expect: halted memory_limit
# iter(int, 1) never ends; list() consumes it in C (materialized in charged chunks).
def handler(payload):
    return bytes(len(list(iter(int, 1))))
