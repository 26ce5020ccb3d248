# expect: halted memory_limit
def handler(payload):
    items = [0]
    while True:
        items += items
