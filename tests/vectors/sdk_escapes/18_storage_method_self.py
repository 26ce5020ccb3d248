# expect: rejected dunder_attribute
# self.storage is an SDK object; its bound methods lead back to it only.
from cowboy_sdk import actor


@actor
class A:
    def ping(self, payload):
        return repr(self.storage.get_raw.__func__.__globals__).encode()


def handler(payload):
    return A().ping(payload)
