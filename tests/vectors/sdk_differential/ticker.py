# tests/vectors/sdk_actors/ticker.py with runtime.get_block_height(): SDK 0.1.6's runtime has no current_block
# (its own timer.py docstring uses it; the node provides it, see test_sdk_differential_corpus.py).
from cowboy_sdk import actor, public, runtime, timer

PERIOD = 2


@actor
class Ticker:
    @public
    def init(self, payload):
        self.storage["count"] = 0
        self.storage["timer"] = timer.schedule(runtime.get_block_height() + PERIOD, b"tick", handler="on_tick")
        return b"ok"

    @timer
    def on_tick(self, payload):
        self.storage["count"] = self.storage["count"] + 1
        self.storage["last_payload"] = payload
        self.storage["timer"] = timer.schedule(runtime.get_block_height() + PERIOD, payload, handler="on_tick")
        return b""

    @public
    def count(self, payload):
        return str(self.storage["count"]).encode()
