# expect: halted handler_error
# AttributeError.obj used to hand out the real builtin type behind the guarded `list`.
def handler(payload):
    try:
        list.no_such_attribute  # noqa: B018
    except AttributeError as e:
        real = e.obj
    return bytes(len(real(range(10 ** 8))))
