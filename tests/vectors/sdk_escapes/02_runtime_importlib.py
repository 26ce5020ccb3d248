# expect: halted handler_error
import cowboy_sdk


def handler(payload):
    lib = cowboy_sdk.runtime.importlib
    return repr(lib.import_module("os")).encode()
