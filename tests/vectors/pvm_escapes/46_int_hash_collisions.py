# expect: halted handler_error
# Ints equal modulo 2**61-1 share a hash: a dict of them costs O(n**2) unmetered probes.
def handler(payload):
    d = {}
    for i in range(100000):
        d[i * (2 ** 61 - 1)] = i
    return bytes(len(d))
