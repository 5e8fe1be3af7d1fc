"""What a run keeps while it runs: it lets go of what it is done with (agentcore-fsm bench
measures the memory of a thousand runs in flight; these pin the mechanisms, not figures)."""

from __future__ import annotations

import asyncio
import gc
import weakref

from agentcore_fsm.core.abort import AbortController
from agentcore_fsm.runtime.tasks import ToolTasks


class Outcome:
    """A task's result, watched through a weak reference."""


def test_asyncio_tool_tasks_let_go_of_a_finished_batch_when_the_next_starts() -> None:
    refs: list[weakref.ref[Outcome]] = []

    async def task(arg: int) -> Outcome:
        outcome = Outcome()
        refs.append(weakref.ref(outcome))
        return outcome

    async def main() -> None:
        tasks = ToolTasks()
        for i in range(3):
            tasks.spawn(i, task, i)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(refs) == 3
        gc.collect()
        assert all(ref() is not None for ref in refs)  # kept by their ended tasks so far
        tasks.spawn(0, task, 9)  # the next batch
        gc.collect()
        assert [ref() is None for ref in refs] == [True, True, True]
        await tasks.join()

    asyncio.run(main())


def test_asyncio_tool_tasks_still_cancel_the_running_ones_after_letting_go() -> None:
    cancelled: list[int] = []

    async def quick(arg: int) -> None:
        return None

    async def slow(arg: int) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(arg)
            raise

    async def main() -> None:
        tasks = ToolTasks()
        tasks.spawn(0, quick, 0)
        await asyncio.sleep(0)
        tasks.spawn(1, slow, 1)
        tasks.spawn(2, slow, 2)
        await asyncio.sleep(0)
        tasks.cancel_all()
        await tasks.join()

    asyncio.run(main())
    assert sorted(cancelled) == [1, 2]


def test_remove_callback_stops_a_callback_and_ignores_one_not_added() -> None:
    controller = AbortController()
    called: list[str] = []

    def first() -> None:
        called.append("first")

    def second() -> None:
        called.append("second")

    controller.signal.add_callback(first)
    controller.signal.add_callback(second)
    controller.signal.remove_callback(first)
    controller.signal.remove_callback(first)  # not there any more: nothing happens
    controller.signal.remove_callback(lambda: None)
    controller.abort()
    assert called == ["second"]
