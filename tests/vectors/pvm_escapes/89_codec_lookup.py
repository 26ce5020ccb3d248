# expect: halted handler_error
# Arbitrary codecs import modules at run time; only utf-8/ascii/latin-1 are available.
def handler(payload):
    return "text".encode("rot13")
