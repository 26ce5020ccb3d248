# Errors as an SDK actor meets them: its own exceptions, Python's, a private handler, a bad payload.
from cowboy_sdk import actor, codec, public


@actor
class Errors:
    @public
    def init(self, payload):
        self.storage["calls"] = 0
        return b"ok"

    @public
    def fail(self, text):
        self.storage["calls"] = self.storage["calls"] + 1  # a failed call's writes
        raise ValueError("bad input: " + text)

    @public
    def missing(self, key):
        return codec.encode({"x": 1}[key])

    @public
    def divide(self, n):
        return codec.encode(10 // n)

    @public(decode="raw")
    def raw(self, payload):
        return payload[::-1]

    @public
    def typed(self, value):
        return codec.encode(value["n"] + 1)

    def private(self, payload):
        self.storage["private"] = True
        return b"private"
