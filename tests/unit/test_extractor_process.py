"""The offline extractor's rules run in a process of their own, off the worker's event loop (service/ai/offline/
process.py): the same facts as in-process, a loop that keeps turning while they run, and a dead process that fails
one call as a dependency outage (retried) and is replaced on the next."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from service.ai.extraction import Message
from service.ai.offline.extractor import OfflineExtractor
from service.ai.offline.process import ProcessExtractor
from service.core.errors import DependencyUnavailable

CHAT = [
    Message(role="user", content="I live in Lisbon, near the river. I prefer tabs over spaces."),
    Message(role="assistant", content="Noted."),
    Message(role="user", content="Our CI runs on Jenkins and I use neovim with the gruvbox theme."),
]


async def test_the_process_gives_the_facts_the_rules_give() -> None:
    extractor = ProcessExtractor()
    try:
        result = await extractor.extract(CHAT, "p1")
        expected = await OfflineExtractor().extract(CHAT, "p1")
        assert result.model_dump() == expected.model_dump() and result.facts
        assert result.extractor == "offline"
    finally:
        extractor.close()


async def test_the_loop_turns_while_a_long_conversation_is_extracted() -> None:
    long_chat = [Message(role="user", content=f"I use tool{i} for project{i} and I prefer tabs in repo{i}.")
                 for i in range(200)]
    extractor = ProcessExtractor(max_facts=10_000)
    try:
        await extractor.extract(CHAT)  # the process is started
        ticks = 0
        stop = False

        async def tick() -> None:
            nonlocal ticks
            while not stop:
                await asyncio.sleep(0.001)
                ticks += 1

        ticker = asyncio.create_task(tick())
        await extractor.extract(long_chat)
        stop = True
        await ticker
        # In-process, the rules hold the loop for the whole call: no tick. Here the loop kept turning.
        assert ticks >= 2, ticks
        ticks, stop = 0, False
        ticker = asyncio.create_task(tick())
        await OfflineExtractor(max_facts=10_000).extract(long_chat)
        stop = True
        await ticker
        assert ticks <= 1, ticks  # the contrast: in-process, the loop waited for the rules
    finally:
        extractor.close()


async def test_a_dead_process_fails_one_call_as_an_outage_and_is_replaced() -> None:
    extractor = ProcessExtractor()
    try:
        await extractor.extract(CHAT)
        pool = extractor._executor()
        for pid in list(pool._processes):  # the test kills the child on purpose
            os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        with pytest.raises(DependencyUnavailable, match="extractor process"):
            await extractor.extract(CHAT)
        assert (await extractor.extract(CHAT)).facts  # a new process answers
    finally:
        extractor.close()
