# expect: rejected bare_except
def handler(payload):
    while True:
        try:
            while True:
                pass
        except:  # noqa: E722
            pass
