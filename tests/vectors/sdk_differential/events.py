# Events: @emit on a handler's return value and runtime.emit_event with CBOR and raw data.
from cowboy_sdk import actor, emit, public, runtime


@actor
class Events:
    @public
    @emit("price_update")
    def update(self, price):
        self.storage["price"] = price
        return {"price": price, "unit": "µ"}

    @public
    def note(self, text):
        runtime.emit_event("note", text.encode("utf-8"))
        runtime.emit_event("note.cbor", {"len": len(text), "text": text})
        return b""
