"""What a reply costs (``promptweave.providers.cost``, ``docs/cost.md``): the price table, the
tokens of a reply with their basis, and money from usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptweave import Config, ConfigError
from promptweave.config import ModelPrice
from promptweave.providers.cost import (
    MESSAGE_OVERHEAD_TOKENS,
    body_texts,
    estimate_cached_tokens,
    price_for,
    price_tokens,
    price_usage,
    prompt_tokens,
    reply_spend,
    reply_tokens,
    spend_totals,
)
from promptweave.providers.exchange import ProviderApi, ProviderRequest, SubmitResult, Usage
from promptweave.providers.prefix import PrefixReport, canonical_json
from promptweave.text.tokens import COUNTED, ESTIMATED, REPORTED, TokenTally, estimate_tokens

GPT_4O_MINI = ModelPrice(input=0.15, cached_input=0.075, output=0.60, min_cached_tokens=1024)
CLAUDE = ModelPrice(input=3.0, cached_input=0.30, cache_write=3.75, output=15.0)


def _request(body: dict, prefix: PrefixReport | None = None) -> ProviderRequest:
    return ProviderRequest(
        api=ProviderApi.OPENAI_CHAT,
        path="/chat/completions",
        body=body,
        conversation_key="g1",
        turn_id="t1",
        segments=(("body", canonical_json(body)),),
        prefix=prefix,
    )


def test_the_price_table_is_read_per_model_from_promptweave_toml(tmp_path: Path):
    path = tmp_path / "promptweave.toml"
    path.write_text(
        '[prices."gpt-4o-mini"]\ninput = 0.15\ncached_input = 0.075\noutput = 0.6\n'
        '[prices."claude-sonnet-4"]\ninput = 3\ncache_write = 3.75\ncached_input = 0.3\n'
        'output = 15\ncurrency = "USD"\n',
        encoding="utf-8",
    )
    config = Config.from_file(path)
    assert price_for(config, "gpt-4o-mini") == ModelPrice(
        input=0.15, cached_input=0.075, output=0.6
    )
    assert price_for(config, "claude-sonnet-4") == CLAUDE
    assert price_for(config, "unknown") is None


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("[prices.m]\ninput = 1\n", "required field missing @ $.prices['m'].output"),
        ("[prices.m]\ninput = -1\noutput = 1\n", "input must be a price per million tokens"),
        ("[prices.m]\ninput = 1\noutput = 1\ncache = 1\n", "extra fields found (cache)"),
        ('[prices.m]\ninput = 1\noutput = "a lot"\n', "expected float @ $.prices['m'].output"),
    ],
)
def test_a_wrong_price_row_is_a_config_error_naming_its_key(tmp_path: Path, table, problem):
    path = tmp_path / "promptweave.toml"
    path.write_text(table, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        Config.from_file(path)
    assert problem in str(raised.value)


def test_money_prices_uncached_cached_written_and_output_tokens_apart():
    # 10,000 prompt tokens of which 6,000 from the cache and 1,000 written to it, 500 output.
    cost = price_tokens(CLAUDE, prompt=10_000, cached=6_000, cache_write=1_000, output=500)
    assert cost == pytest.approx((3_000 * 3.0 + 6_000 * 0.30 + 1_000 * 3.75 + 500 * 15.0) / 1e6)
    # A row without cache prices bills every prompt token at the input price.
    plain = ModelPrice(input=1.0, output=2.0)
    assert price_tokens(plain, prompt=1_000, cached=400, output=10) == pytest.approx(
        (1_000 * 1.0 + 10 * 2.0) / 1e6
    )
    with pytest.raises(ValueError, match="exceed the prompt"):
        price_tokens(plain, prompt=10, cached=8, cache_write=5)


def test_price_usage_prices_what_the_provider_reported():
    usage = Usage(prompt_tokens=2_000, output_tokens=100, cached_tokens=1_536)
    assert price_usage(usage, GPT_4O_MINI) == pytest.approx(
        (464 * 0.15 + 1_536 * 0.075 + 100 * 0.60) / 1e6
    )
    assert price_usage(Usage(), GPT_4O_MINI) == 0


def test_the_body_texts_leave_out_ids_roles_and_images():
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "你是小织"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "看看这张图"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ],
        "prompt_cache_key": "g1",
    }
    texts, messages, images = body_texts(body)
    assert texts == ["你是小织", "看看这张图"] and messages == 2 and images == 1
    tokens = prompt_tokens(body, estimate_tokens, 1500)
    assert tokens == estimate_tokens("你是小织") + estimate_tokens("看看这张图") + (
        2 * MESSAGE_OVERHEAD_TOKENS + 1500
    )


def test_cached_tokens_are_estimated_from_the_prefix_shared_with_the_previous_request():
    body = {"messages": [{"role": "user", "content": "甲" * 3000 + "乙" * 1000}]}
    whole = len(canonical_json(body).encode())
    shared = len(canonical_json(body).encode()[: whole * 3 // 4])
    prefix = PrefixReport(
        common_prefix_bytes=shared, request_bytes=whole, previous_bytes=whole, first_difference=None
    )
    cached = estimate_cached_tokens(_request(body, prefix), 3200, 0)
    assert 2300 < cached < 2500  # three quarters of the body, in tokens
    assert estimate_cached_tokens(_request(body, prefix), 3200, 4000) == 0  # too short to cache
    assert estimate_cached_tokens(_request(body), 3200, 0) == 0  # no previous request


def test_reported_figures_win_and_the_others_say_they_are_estimated():
    found = reply_tokens(
        Usage(prompt_tokens=1_900, output_tokens=40),
        prompt=1_700,
        prompt_basis=ESTIMATED,
        cached=900,
        output=35,
    )
    assert (found.prompt, found.cached, found.output) == (1_900, 900, 40)
    assert found.basis == {
        "prompt": REPORTED,
        "cached": ESTIMATED,
        "cache_write": ESTIMATED,
        "output": REPORTED,
    }
    counted = reply_tokens(None, prompt=1_700, prompt_basis=COUNTED, cached=0, output=35)
    assert counted.basis["prompt"] == COUNTED and counted.prompt == 1_700


def test_a_reply_spend_counts_only_what_reached_the_provider_and_prices_it():
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "你好" * 100}]}
    config = Config(prices={"gpt-4o-mini": GPT_4O_MINI})
    answered = SubmitResult(sent=True, status="ok", text="好的好的")
    spend = reply_spend(config, [(_request(body), answered)], None, TokenTally())
    assert spend is not None
    assert spend["model"] == "gpt-4o-mini"
    assert spend["prompt_tokens"] == 160 + MESSAGE_OVERHEAD_TOKENS
    assert spend["output_tokens"] == estimate_tokens("好的好的")
    assert spend["basis"]["prompt"] == ESTIMATED and spend["currency"] == "USD"
    assert spend["cost"] == pytest.approx(
        price_tokens(GPT_4O_MINI, prompt=spend["prompt_tokens"], output=spend["output_tokens"])
    )
    offline = SubmitResult(sent=False, status="offline")
    assert reply_spend(config, [(_request(body), offline)], None, TokenTally()) is None
    failed = SubmitResult(sent=True, status="error", detail="HTTP 500")
    assert reply_spend(config, [(_request(body), failed)], None, TokenTally()) is None
    unpriced = reply_spend(Config(), [(_request(body), answered)], None, TokenTally())
    assert unpriced is not None and unpriced["cost"] is None and unpriced["currency"] is None


def test_totals_per_reply_and_per_thousand_messages():
    row = {
        "prompt_tokens": 2_000,
        "cached_tokens": 1_000,
        "cache_write_tokens": 0,
        "output_tokens": 50,
        "basis": {
            "prompt": REPORTED,
            "cached": ESTIMATED,
            "cache_write": ESTIMATED,
            "output": REPORTED,
        },
    }
    counted = {**row, "basis": {**row["basis"], "prompt": COUNTED}}
    totals = spend_totals([row, counted], price=GPT_4O_MINI, messages=20, answered=1)
    assert totals["requests"] == 2 and totals["prompt_tokens"] == 4_000
    assert totals["basis"]["prompt"] == COUNTED  # the weakest of the two
    assert totals["per_reply"]["prompt_tokens"] == 4_000  # two requests, one reply delivered
    assert totals["per_1000_messages"]["output_tokens"] == pytest.approx(100 * 50)
    assert totals["cost"] == pytest.approx(
        price_tokens(GPT_4O_MINI, prompt=4_000, cached=2_000, output=100)
    )
    nothing = spend_totals([], price=None, messages=0, answered=0)
    assert nothing["cost"] is None and nothing["per_reply"] is None


def test_hook_count_tokens():
    from promptweave import hookimpl
    from promptweave.plugins.manager import build_plugin_manager

    class OneTokenACharacter:
        @hookimpl
        def count_tokens(self, text: str, config: Config) -> int | None:
            return None if text == "pass" else len(text)

    class Wrong:
        @hookimpl
        def count_tokens(self, text: str, config: Config) -> object:
            return "12"

    hooks = build_plugin_manager(environ={}, extra_plugins=[OneTokenACharacter()]).hooks
    assert hooks.count_tokens("你好，世界", Config()) == (5, COUNTED)
    assert hooks.count_tokens("pass", Config()) == (estimate_tokens("pass"), ESTIMATED)
    tally = hooks.token_counter(Config())
    assert tally("abcdefgh") == 8 and tally.basis == COUNTED
    wrong = build_plugin_manager(environ={}, extra_plugins=[Wrong()]).hooks.token_counter(Config())
    assert wrong("你好") == estimate_tokens("你好") and wrong.basis == ESTIMATED
    assert len(wrong.faults) == 1 and "returned str '12', expected an int" in wrong.faults[0]
    without = build_plugin_manager(environ={}).hooks
    assert without.count_tokens("你好", Config()) == (estimate_tokens("你好"), ESTIMATED)
    estimated = without.token_counter(Config())
    assert estimated("你好，世界 ok") == estimate_tokens("你好，世界 ok")
    assert estimated.basis == ESTIMATED and estimated.faults == []
