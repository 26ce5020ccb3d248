# expect: rejected finally_control_flow
def handler(payload):
    try:
        while True:
            pass
    finally:
        return b"survived"  # noqa: B012
