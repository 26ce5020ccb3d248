# A continuation actor written as the cowboy-actor-sdk documentation shows: two runner jobs in sequence.
from cowboy_sdk import actor, capture, public, runner


@actor
class Weather:
    @public
    @runner.continuation
    async def refresh(self, city):
        ctx = capture()
        ctx.city = city
        page = await runner.http(f"http://127.0.0.1:9/{ctx.city}")
        self.storage["page"] = page.data
        summary = await runner.llm(f"Summarise: {page.text}", model="stub-model", max_tokens=64)
        self.storage["summary"] = summary.text
        self.storage["steps"] = self.storage.get("steps", 0) + 1
        return b"done"

    @public
    def show(self, payload):
        return (str(self.storage.get("page")) + "|" + str(self.storage.get("summary"))).encode()
