# expect: halted memory_limit
# Each item is cheap (the same 100 kB string): join checks the running length per chunk.
def handler(payload):
    piece = "x" * 100000
    return "".join(piece for _ in range(10 ** 9)).encode()
