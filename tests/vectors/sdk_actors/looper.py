# Continuations awaiting inside loops under @bounded_loop (lowered by the node: actors/fsm_loops.py).
from cowboy_sdk import BoundedRange, actor, bounded_loop, capture, public, runner


@actor
class Looper:
    @public
    @bounded_loop(max_iterations=5)
    @runner.continuation
    async def crawl(self, topics):
        ctx = capture()
        ctx.count = len(topics)
        notes = {"seen": [], "meta": {"n": 0, "pairs": [[0, "start"]]}, "raw": b"\x00\xff"}
        for topic in topics:
            answer = await runner.llm(f"About {topic}", model="stub-model", max_tokens=8, timeout_blocks=10)
            notes["seen"].append(answer.text)
            notes["meta"]["n"] += 1
            notes["meta"]["pairs"].append([topic, answer.text])
            self.storage["notes"] = notes
        final = await runner.http(f"http://127.0.0.1:9/done/{ctx.count}")
        self.storage["final"] = [final.data, notes["meta"]["n"]]
        return b"done"

    @public
    @bounded_loop(max_iterations=2)
    @runner.continuation(timeout_blocks=500, guard_keys=["cfg"])
    async def capped(self, n):
        got = []
        for i in range(n):
            page = await runner.http(f"http://127.0.0.1:9/page/{i}")
            got.append(page.data)
            self.storage["got"] = got
        return b"ok"

    @public
    @bounded_loop(max_iterations=10)
    @runner.continuation
    async def until(self, target):
        total = 0
        step = 0
        while total < target:
            step += 1
            part = await runner.http(f"http://127.0.0.1:9/step/{step}")
            total += part.data["add"]
            if total % 2 == 1:
                note = await runner.llm(f"odd {total}", model="stub-model", max_tokens=8)
                odd = self.storage.get("odd", [])
                odd.append(note.text)
                self.storage["odd"] = odd
            elif total > 100:
                break
        self.storage["total"] = [total, step]
        return b"ok"

    @public
    @bounded_loop(max_iterations=3)
    @runner.continuation
    async def digest(self, n):
        store = self.storage  # not storable: left behind at the await, never read after it
        store["started"] = True
        page = await runner.http("http://127.0.0.1:9/index")
        lines = []
        for i in range(n):
            line = await runner.llm(f"Line {i} of {page.text}", model="stub-model", max_tokens=8)
            lines.append(line.text + "/" + page.data["title"])
        self.storage["lines"] = lines
        return b"ok"

    @public
    @bounded_loop(max_iterations=6)
    @runner.continuation
    async def grid(self, rows):
        cells = []
        for r in BoundedRange(rows):
            for c in ["a", "b"]:
                if c == "b" and r == 1:
                    continue
                cell = await runner.llm(f"{r}{c}", model="stub-model", max_tokens=8)
                cells.append(cell.text)
        self.storage["cells"] = cells
        return b"ok"
