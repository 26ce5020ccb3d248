# expect: halted handler_error
import cowboy_sdk


def handler(payload):
    return repr(cowboy_sdk.testing.SimulatedChain).encode()
