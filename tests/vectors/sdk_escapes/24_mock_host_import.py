# expect: rejected import_not_allowed
# The SDK's mock host (and every other SDK module) is not importable; only the curated view is.
import cowboy_sdk_mock_host


def handler(payload):
    return repr(cowboy_sdk_mock_host).encode()
