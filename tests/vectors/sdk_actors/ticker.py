# A periodic actor written exactly as the cowboy-actor-sdk documentation shows.
from cowboy_sdk import actor, public, runtime, timer

PERIOD = 2


@actor
class Ticker:
    @public
    def init(self, payload):
        self.storage["count"] = 0
        self.storage["timer"] = timer.schedule(runtime.current_block() + PERIOD, b"tick", handler="on_tick")
        return b"ok"

    @timer
    def on_tick(self, payload):
        self.storage["count"] = self.storage["count"] + 1
        self.storage["last_payload"] = payload
        self.storage["timer"] = timer.schedule(runtime.current_block() + PERIOD, payload, handler="on_tick")
        return b""

    @public
    def count(self, payload):
        return str(self.storage["count"]).encode()
