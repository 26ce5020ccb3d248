# TaskGroup fan-out in a continuation, as cowboy_sdk.taskgroup documents it: two jobs at once, one resume.
from cowboy_sdk import TaskGroup, actor, capture, public, runner


@actor
class Fanout:
    @public
    @runner.continuation
    async def survey(self, payload):
        ctx = capture()
        ctx.topic = payload
        async with TaskGroup() as tg:
            page = tg.create_task(runner.http("http://127.0.0.1:9/a"))
            answer = tg.create_task(runner.llm(f"About {ctx.topic}?", model="stub-model", max_tokens=16))
        self.storage["page"] = page.result().data
        self.storage["answer"] = answer.result().text
        return b"done"
