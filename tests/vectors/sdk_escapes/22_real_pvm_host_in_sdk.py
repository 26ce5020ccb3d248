# expect: halted handler_error
# The SDK resolves the host through sys.modules; the view never hands that module out.
import cowboy_sdk


def handler(payload):
    return repr(cowboy_sdk.pvm_host).encode()
