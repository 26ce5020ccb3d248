# The callee of caller.py: stateless, CBOR in and out.
from cowboy_sdk import actor, codec, public


@actor
class Callee:
    @public
    def square(self, n):
        return codec.encode(n * n)

    @public
    def explode(self, value):
        raise RuntimeError("callee failed")
