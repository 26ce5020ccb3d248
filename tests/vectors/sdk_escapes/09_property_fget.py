# expect: rejected forbidden_attribute
# @actor installs properties on the class; their getters are host lambdas.
from cowboy_sdk import actor


@actor
class A:
    def ping(self, payload):
        return payload


def handler(payload):
    return repr(A.storage.fget).encode()
