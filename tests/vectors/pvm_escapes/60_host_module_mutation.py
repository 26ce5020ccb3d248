# expect: halted handler_error
# Replacing a host function would leak into every later call in the process.
import pvm_host


def handler(payload):
    pvm_host.get_state = lambda key: b"forged"
    return b"x"
