# expect: halted memory_limit
def handler(payload):
    return bytes(len(sum([[0] * 600000] * 1000, [])))  # noqa: RUF017
