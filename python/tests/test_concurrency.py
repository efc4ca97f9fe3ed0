"""asyncio and threads."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Dict, List, Optional

from hold import _agent

from helpers import HANG, TempDirTest, hold


class AsyncTest(TempDirTest):
    def test_alock(self) -> None:
        t = self.path("T")

        async def main() -> None:
            async with hold.alock(t, timeout=5) as l:
                self.assertEqual(l.path, t + ".lock")
                self.assertEqual(hold.status(t)["state"], "held exclusive")
            self.assertEqual(hold.status(t)["state"], "free")
            l2 = await hold.alock(t)
            l2.release()

        asyncio.run(main())

    def test_wait_does_not_block_the_loop_and_can_be_cancelled(self) -> None:
        t = self.path("T")
        holder = hold.lock(t)
        # The replies to abandoned requests, as the agent sends them.
        ag = _agent.get_agent()
        late: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        undo = ag._undo

        def record(req: _agent.Request) -> None:
            late.put(req.reply)
            undo(req)

        ag._undo = record  # type: ignore[method-assign]
        self.addCleanup(delattr, ag, "_undo")

        async def main() -> None:
            task = asyncio.ensure_future(hold.alock(t))
            ticks = 0
            for _ in range(20):  # the loop runs while the task waits
                await asyncio.sleep(0.01)
                ticks += 1
            self.assertFalse(task.done())
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            self.assertEqual(ticks, 20)
            # asyncio.wait_for cancels the same way.
            with self.assertRaises(asyncio.TimeoutError):
                await asyncio.wait_for(hold.alock(t), 0.1)

        asyncio.run(main())
        # The agent ended both waits (EABORT) while the lock was still held:
        # neither was left waiting to take it.
        for _ in range(2):
            reply = late.get(timeout=HANG)
            assert reply is not None
            self.assertEqual(reply["error"]["code"], "EABORT", reply)
        holder.check()
        holder.release()
        with hold.lock(t, timeout=HANG):
            pass

    def test_timeout(self) -> None:
        t = self.path("T")

        async def main() -> None:
            with hold.lock(t):
                with self.assertRaises(hold.Timeout):
                    await hold.alock(t, timeout=0.1)

        asyncio.run(main())

    def test_waiters_in_one_loop(self) -> None:
        t = self.path("T")
        order: List[int] = []

        async def one(i: int) -> None:
            async with hold.alock(t, fair=True):
                order.append(i)
                await asyncio.sleep(0.001)

        async def main() -> None:
            await asyncio.gather(*(one(i) for i in range(10)))

        asyncio.run(main())
        self.assertEqual(sorted(order), list(range(10)))


class ThreadTest(TempDirTest):
    def test_threads_count_exactly(self) -> None:
        """Threads share the agent and both channels: replies reach the
        thread that asked, and the lock excludes across threads."""
        counter = self.path("counter")
        with open(counter, "w") as f:
            f.write("0")
        errors: List[BaseException] = []

        def work(k: int) -> None:
            try:
                for i in range(60):
                    if i % 3 == 2:
                        hold.update(counter, lambda old: str(int(old) + 1))
                        continue
                    with hold.lock(counter, fair=(k % 2 == 0)):
                        with open(counter) as f:
                            n = int(f.read())
                        with open(counter, "w") as f:
                            f.write(str(n + 1))
                    # Another lock, untouched by the others: tries on the
                    # synchronous channel interleave with the waits above.
                    hold.try_lock(self.path(f"own{k}")).release()
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(errors, [])
        with open(counter) as f:
            self.assertEqual(int(f.read()), 6 * 60)
