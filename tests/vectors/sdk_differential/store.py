# Storage as the cowboy-actor-sdk README shows it: self.storage with nested values, counters, deletes.
# @public handlers get their payload decoded with the SDK's default codec (CBOR).
from cowboy_sdk import actor, codec, public


@actor
class Store:
    @public
    def init(self, payload):
        self.storage["n"] = 0
        self.storage["cfg"] = {"name": "store", "tags": ["a", "b"], "limits": {"max": 10, "min": -3}}
        return b"ok"

    @public
    def put(self, args):
        self.storage[args["k"]] = args["v"]
        self.storage["n"] = self.storage["n"] + 1
        return codec.encode(self.storage["n"])

    @public
    def drop(self, key):
        existed = key in self.storage
        if existed:
            del self.storage[key]
        return b"1" if existed else b"0"

    @public
    def get(self, key):
        return codec.encode(self.storage.get(key))

    @public
    def nothing(self, payload):
        self.storage["touched"] = True
