# expect: rejected dunder_attribute
import cowboy_sdk


def handler(payload):
    try:
        cowboy_sdk.codec.decode(b"\xff")
    except cowboy_sdk.CowboyError as exc:
        return repr(exc.__traceback__.tb_frame).encode()
    return b""
