"""End to end against a real local model: llama.cpp's OpenAI-compatible server with
SmolLM2-135M-Instruct (``docs/replay.md#a-real-local-model``).

``.ci/run`` builds the server, starts it and sets ``PROMPTWEAVE_TEST_LLAMA_URL`` (its ``/v1`` base
URL) and ``PROMPTWEAVE_TEST_LLAMA_LOG`` (its log file) with ``PROMPTWEAVE_REQUIRE_LLAMA=1``, so
these tests always run there. Elsewhere they are skipped, with the reason, unless those are set.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT

from promptweave import BotLoop, Config, Promptweave, Stores
from promptweave.config import DeliveryConfig, ProviderConfig, TurnContextConfig
from promptweave.loop.events import OutcomeStatus
from promptweave.providers.exchange import ProviderSpec
from promptweave.replay.replayer import ReplayClock, ReplayTransport, read_chat_log

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"
#: 栗子's late-night conversation with the bot: one conversation, turn after turn.
SPEAKER = "30063"
REQUESTS = 10
_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens")


async def _no_pause(_seconds: float) -> None:
    return None


def _conversation(url: str) -> list[Any]:
    """Replay the bundled chat's long conversation through the loop, answered by the server,
    until ``REQUESTS`` requests were sent."""
    config = Config(
        plugins=Config().plugins,
        provider=ProviderConfig(api="openai_chat", model="smollm2", base_url=url, max_tokens=48),
        turn_context=TurnContextConfig(turn_sections="user"),
        delivery=DeliveryConfig(pause_base_s=0, pause_per_char_s=0),
    )
    clock = ReplayClock()
    runtime = Promptweave.from_config(
        config, contrib=["onebot", "openai_compat"], stores=Stores.in_memory(), clock=clock
    )
    events = [
        event
        for event in read_chat_log(CHAT, runtime).events
        if event.message.sender_id == SPEAKER and event.message.addressed
    ]
    loop = BotLoop(runtime=runtime, spec=ProviderSpec.from_config(config.provider), sleep=_no_pause)
    transport = ReplayTransport()
    outcomes: list[Any] = []

    async def run() -> None:
        for event in events:
            clock.now = event.message.time
            outcome = await loop.handle(event, transport)
            runtime.background.wait()
            if outcome.request is not None:
                outcomes.append(outcome)
            if len(outcomes) == REQUESTS:
                return

    asyncio.run(run())
    runtime.close()
    return outcomes


@pytest.fixture(scope="module")
def replayed(llama: tuple[str, Path]) -> tuple[list[Any], list[tuple[int, int]]]:
    url, log = llama
    start = log.stat().st_size
    outcomes = _conversation(url)
    with log.open(encoding="utf-8", errors="replace") as handle:
        handle.seek(start)
        hits = [(int(hit), int(rest)) for hit, rest in _PREFIX_HIT.findall(handle.read())]
    return outcomes, hits


def test_every_request_is_accepted_and_read_by_the_reply_contract(
    replayed: tuple[list[Any], list[tuple[int, int]]],
) -> None:
    outcomes, _ = replayed
    assert len(outcomes) == REQUESTS
    for outcome in outcomes:
        assert outcome.trace["submit"]["status"] == "ok", outcome.trace["submit"]
        assert "read" in outcome.trace  # the answer went through the reply contract
        assert outcome.status in (OutcomeStatus.REPLIED, OutcomeStatus.SILENT)
        assert outcome.usage is not None and outcome.usage.prompt_tokens > 0
        if outcome.status == OutcomeStatus.REPLIED:
            assert all(bubble.strip() for bubble in outcome.bubbles)


def test_the_server_reuses_the_prompt_prefix_between_turns_of_the_conversation(
    replayed: tuple[list[Any], list[tuple[int, int]]],
) -> None:
    outcomes, hits = replayed
    # One "prefix-match hit" line per request after the first, as llama.cpp counts it.
    assert len(hits) >= REQUESTS - 1
    prompt_tokens = [outcome.usage.prompt_tokens for outcome in outcomes]
    shares = [
        hit / tokens
        for (hit, _), tokens in zip(hits[-(REQUESTS - 1) :], prompt_tokens[1:], strict=True)
    ]
    assert statistics.median(shares) > 0.5, shares
