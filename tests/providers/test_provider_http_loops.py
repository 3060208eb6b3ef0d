"""A provider client used from two event loops (the bot's, and the learners' loop thread) keeps
one async client per loop instead of building a new one at each switch."""

from __future__ import annotations

import asyncio

import httpx

from promptweave.contrib._provider_http import ProviderHttp

OK = {"choices": [{"message": {"role": "assistant", "content": "好"}}]}


def test_each_loop_keeps_its_own_async_client_across_switches() -> None:
    http = ProviderHttp(transport=httpx.MockTransport(lambda _: httpx.Response(200, json=OK)))

    async def client_of_this_loop() -> httpx.AsyncClient:
        result = await http.apost("openai_chat", "http://model/v1/chat/completions", b"{}", {})
        assert result.status == "ok"
        return http._async()

    bots, learners = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        seen = [
            loop.run_until_complete(client_of_this_loop())
            for loop in (bots, learners, bots, learners, bots)
        ]
        assert seen[0] is seen[2] is seen[4] and seen[1] is seen[3] and seen[0] is not seen[1]
        bots.run_until_complete(http.aclose())
        assert seen[0].is_closed and not seen[1].is_closed
    finally:
        learners.run_until_complete(http.aclose())
        bots.close()
        learners.close()
    # A loop closed since leaves nothing behind once another loop asks.
    third = asyncio.new_event_loop()
    try:
        third.run_until_complete(client_of_this_loop())
        assert list(http._async_clients) == [third]
    finally:
        third.run_until_complete(http.aclose())
        third.close()
