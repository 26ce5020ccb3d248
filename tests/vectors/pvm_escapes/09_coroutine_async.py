# expect: rejected async
async def coro():
    return 1


def handler(payload):
    c = coro()
    return str(c.cr_frame).encode()
