# expect: halted handler_error
# Re-running a builtin constructor through __init__ would bypass the guarded list().
def handler(payload):
    items = []
    items.__init__(range(10 ** 9))
    return bytes(len(items))
