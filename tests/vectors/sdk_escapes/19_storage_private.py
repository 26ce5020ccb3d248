# expect: rejected private_attribute
from cowboy_sdk import actor


@actor
class A:
    def ping(self, payload):
        return repr(self._storage).encode()


def handler(payload):
    return A().ping(payload)
