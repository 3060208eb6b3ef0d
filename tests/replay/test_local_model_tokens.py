"""Token counts against the real local model (``docs/cost.md``, "Counting tokens"): llama.cpp's
server with SmolLM2-135M-Instruct, whose tokenizer is not Qwen's.

``.ci/run`` starts the server and sets ``PROMPTWEAVE_TEST_LLAMA_URL`` (``docs/replay.md#a-real-local-model``);
elsewhere these tests are skipped with the reason unless it is set.

What holds here, and is asserted: the contrib plugin ``tokenize_endpoint`` counts with the
server's own tokenizer, so the prompt it counts for a request is within 5% of the prompt tokens the
server then reports for it; the built-in estimate, fitted to Qwen's and DeepSeek's tokenizers, is
far under SmolLM2's count (its byte-level vocabulary splits a Chinese character into about two
tokens): on the bundled chat SmolLM2 counts about 2.3 times the estimate, which is why a deployment
of such a model configures the tokenize endpoint.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from base_support import ROOT
from loop_support import RecordingTransport, event

from promptweave import BotLoop, Config, Promptweave, Stores
from promptweave.config import (
    DeliveryConfig,
    PluginsConfig,
    ProviderConfig,
    RoutingConfig,
    TokensConfig,
)
from promptweave.contrib.tokenize_endpoint import TokenizeEndpoint
from promptweave.providers.cost import prompt_tokens
from promptweave.providers.exchange import ProviderSpec
from promptweave.text.tokens import COUNTED, REPORTED, estimate_tokens

CHAT = ROOT / "examples" / "replay" / "weekend_chat.onebot.jsonl"


def _tokenize_url(llama_url: str) -> str:
    """llama-cpp-python's count endpoint beside the server's ``/v1`` API."""
    return llama_url.rstrip("/").removesuffix("/v1") + "/extras/tokenize/count"


def test_the_estimate_is_under_smollm2s_count_by_the_documented_factor(
    llama: tuple[str, Path],
) -> None:
    endpoint = TokenizeEndpoint(
        url=_tokenize_url(llama[0]), timeout_s=30.0, cache_size=0, retry_after_s=0.0
    )
    lines = [json.loads(line) for line in CHAT.read_text(encoding="utf-8").splitlines()]
    texts = [
        "".join(s["data"]["text"] for s in line["message"] if s["type"] == "text")
        for line in lines
        if line.get("post_type") in ("message", "message_sent")
    ]
    counted = sum(endpoint.count(text) for text in texts if text)
    ratio = counted / sum(map(estimate_tokens, texts))
    assert 1.9 <= ratio <= 2.7, f"SmolLM2 counts {ratio:.2f} times the estimate"
    endpoint.close()


def test_the_tokenize_endpoint_counts_what_the_server_then_reports(
    llama: tuple[str, Path],
) -> None:
    url = llama[0]
    config = Config(
        plugins=PluginsConfig(contrib=("tokenize_endpoint",)),
        provider=ProviderConfig(api="openai_chat", model="smollm2", base_url=url, max_tokens=8),
        tokens=TokensConfig(tokenize_url=_tokenize_url(url), timeout_s=30.0),
        routing=RoutingConfig(low_engagement=False),
        delivery=DeliveryConfig(pause_base_s=0, pause_per_char_s=0),
    )
    runtime = Promptweave.from_config(
        config, contrib=["openai_compat", "tokenize_endpoint"], stores=Stores.in_memory()
    )

    async def no_pause(_seconds: float) -> None:
        return None

    loop = BotLoop(runtime=runtime, spec=ProviderSpec.from_config(config.provider), sleep=no_pause)
    try:
        outcome = asyncio.run(
            loop.handle(
                event("小织 这周末有什么好玩的安排吗？", addressed=True), RecordingTransport()
            )
        )
        assert outcome.usage is not None and outcome.usage.prompt_tokens, outcome.reason
        tally = runtime.plugins.hooks.token_counter(config)
        counted = prompt_tokens(outcome.request.body, tally, config.turn_context.image_token_cost)
    finally:
        runtime.close()
    assert tally.basis == COUNTED
    reported = outcome.usage.prompt_tokens
    assert abs(counted - reported) <= 0.05 * reported, (counted, reported)
    assert outcome.trace["tokens"]["basis"]["prompt"] == REPORTED
    assert outcome.trace["tokens"]["prompt_tokens"] == reported
    # The estimate, for comparison: far under what this model's tokenizer counts.
    estimated = prompt_tokens(outcome.request.body, estimate_tokens, 1500)
    assert estimated < 0.6 * reported
