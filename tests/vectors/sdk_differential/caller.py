# Cross-actor calls with the SDK's call(): CBOR arguments and return value, and a callee that raises.
from cowboy_sdk import ActorCallError, actor, call, codec, public


@actor
class Caller:
    @public
    def square(self, args):
        result = call(args["target"], "square", args["n"], cycles_limit=200_000)
        self.storage["last"] = result
        return codec.encode(result)

    @public
    def broken(self, target):
        try:
            call(target, "explode", None, cycles_limit=200_000)
        except ActorCallError:
            self.storage["caught"] = True
            return b"caught"
        return b"not caught"
