# expect: halted handler_error
import cowboy_sdk


def handler(payload):
    cowboy_sdk.timer(cowboy_sdk.Address.from_hex)
    return b"tagged"
