"""What a reply costs: its tokens, where each figure came from, and their price (``docs/cost.md``).

A reply's figures are its prompt tokens, the part of them served from the provider's cache, the
tokens written to the cache, and its output tokens. Each is taken from the provider's usage where
it reports it (``reported``), else found here: the prompt counted over the texts of the bodies
sent (``counted`` by a ``count_tokens`` plugin, else ``estimated``), the cached part estimated
from the byte-identical prefix each body shares with its conversation's previous one, the output
counted over the answer's text. :func:`price_usage` prices them with the model's row of the price
table (``[prices."MODEL"]``, :class:`promptweave.config.ModelPrice`).

:func:`price_usage` and :func:`price_for` are the door for anyone showing money (the replay, the
store's stats, a dashboard): price a provider's :class:`~promptweave.providers.exchange.Usage`
for a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptweave.config import Config, ModelPrice
from promptweave.providers.exchange import ProviderRequest, SubmitResult, Usage
from promptweave.text.tokens import (
    ESTIMATED,
    REPORTED,
    TokenTally,
    estimate_tokens,
    weakest_basis,
)

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "ReplyTokens",
    "body_texts",
    "estimate_cached_tokens",
    "format_money",
    "price_for",
    "price_tokens",
    "price_usage",
    "prompt_tokens",
    "reply_spend",
    "reply_tokens",
    "spend_totals",
]

#: Tokens a chat template adds around each message (role markers, separators): the figure
#: OpenAI documents for its chat models, close to what Qwen's and Llama's templates add.
MESSAGE_OVERHEAD_TOKENS = 4
#: Keys of a request body whose string values are not text the model reads as tokens, or are
#: images (counted at ``[turn_context] image_token_cost`` each instead of by their bytes).
_NOT_TEXT = frozenset(
    {
        "model",
        "role",
        "type",
        "id",
        "tool_call_id",
        "call_id",
        "prompt_cache_key",
        "tool_choice",
        "cache_control",
        "media_type",
        "detail",
        "stream",
    }
)
_IMAGE_KEYS = frozenset({"image_url", "source", "image"})


@attrs.frozen(kw_only=True)
class ReplyTokens:
    """The tokens of one reply's requests (a tool turn's rounds summed), each with its basis.

    :param prompt: every prompt token, cached or not.
    :param cached: the prompt tokens served from the cache.
    :param cache_write: the prompt tokens written to the cache (reported by Anthropic; 0 where
        nothing says so).
    :param output: the tokens generated.
    :param basis: per figure (``prompt``, ``cached``, ``cache_write``, ``output``): ``reported``,
        ``counted`` or ``estimated`` (:mod:`promptweave.text.tokens`).
    """

    prompt: int
    cached: int
    cache_write: int
    output: int
    basis: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt,
            "cached_tokens": self.cached,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
            "basis": dict(self.basis),
        }


def body_texts(body: Mapping[str, Any]) -> tuple[list[str], int, int]:
    """The texts of a request body the model reads, its messages and its images.

    Every string of the body counts (system prompt, message contents, tool schemas and results)
    except ids, names of roles and types, and the other keys a provider does not tokenize.

    :returns: ``(texts, messages, images)``.
    """
    texts: list[str] = []
    images = 0

    def walk(value: Any, key: str | None) -> None:
        nonlocal images
        if key in _IMAGE_KEYS:
            images += 1
        elif isinstance(value, str):
            if key not in _NOT_TEXT and value:
                texts.append(value)
        elif isinstance(value, Mapping):
            for name, item in value.items():
                walk(item, str(name))
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, key)

    walk(body, None)
    rows = body.get("messages", body.get("input", ()))
    messages = len(rows) if isinstance(rows, list) else 1
    messages += 1 if body.get("system") or body.get("instructions") else 0
    return texts, messages, images


def prompt_tokens(
    body: Mapping[str, Any], count: Callable[[str], int], image_token_cost: int
) -> int:
    """The prompt tokens of one body: its texts counted by ``count``, the template's
    :data:`MESSAGE_OVERHEAD_TOKENS` a message, ``image_token_cost`` an image."""
    texts, messages, images = body_texts(body)
    return (
        sum(count(text) for text in texts)
        + messages * MESSAGE_OVERHEAD_TOKENS
        + images * image_token_cost
    )


def estimate_cached_tokens(request: ProviderRequest, prompt: int, min_cached_tokens: int) -> int:
    """The prompt tokens of ``request`` a prompt cache would serve, where the provider says
    nothing: the share of ``prompt`` its byte-identical prefix with the conversation's previous
    request holds (measured in estimated tokens of the body, so that UTF-8's three bytes a
    Chinese character do not weigh it); ``0`` without a previous request or when the shared part
    is shorter than ``min_cached_tokens``."""
    prefix = request.prefix
    if prefix is None or not prefix.common_prefix_bytes:
        return 0
    body = request.body_bytes()
    shared = estimate_tokens(body[: prefix.common_prefix_bytes].decode(errors="ignore"))
    whole = estimate_tokens(body.decode(errors="ignore"))
    cached = min(prompt, round(prompt * shared / whole)) if whole else 0
    return cached if cached >= min_cached_tokens else 0


def reply_tokens(
    usage: Usage | None,
    *,
    prompt: int,
    prompt_basis: str,
    cached: int,
    output: int,
) -> ReplyTokens:
    """One reply's figures: what ``usage`` reports, the others as found here.

    :param prompt: the prompt tokens counted over the bodies sent, of basis ``prompt_basis``.
    :param cached: the cached tokens estimated from the prefix (:func:`estimate_cached_tokens`).
    :param output: the output tokens estimated from the answer's text.
    """
    usage = usage or Usage()
    basis = {
        "prompt": prompt_basis,
        "cached": ESTIMATED,
        "cache_write": ESTIMATED,
        "output": ESTIMATED,
    }
    if usage.prompt_tokens is not None:
        prompt, basis["prompt"] = usage.prompt_tokens, REPORTED
    if usage.cached_tokens is not None:
        cached, basis["cached"] = usage.cached_tokens, REPORTED
    cache_write = 0
    if usage.cache_creation_tokens is not None:
        cache_write, basis["cache_write"] = usage.cache_creation_tokens, REPORTED
    if usage.output_tokens is not None:
        output, basis["output"] = usage.output_tokens, REPORTED
    return ReplyTokens(
        prompt=prompt,
        cached=min(cached, prompt),
        cache_write=min(cache_write, max(0, prompt - cached)),
        output=output,
        basis=basis,
    )


def reply_spend(
    config: Config,
    submitted: Sequence[tuple[ProviderRequest, SubmitResult]],
    usage: Usage | None,
    counter: TokenTally,
) -> dict[str, Any] | None:
    """What one turn's requests spent, for its trace (``tokens``) and the replay's record.

    Only the requests the provider answered count (``SubmitResult.sent`` with status ``ok``, or
    any with a usage). The prompt is
    counted over every body sent (a tool round's body again in full: the provider reads it
    again), by ``counter`` (a ``count_tokens`` plugin, else the estimate); the cached part is
    estimated from each body's prefix; the output over the answers' texts and tool calls; the
    provider's ``usage`` (the rounds summed) replaces each figure it reports.

    :returns: :meth:`ReplyTokens.to_json` with ``model``, ``cost`` and ``currency`` (both ``None``
        without a price for the model) and ``count_faults`` (why a text the ``count_tokens``
        plugin failed on was estimated), or ``None`` when no request reached a provider.
    """
    # A provider bills what it answered; a request it refused or failed is billed only where
    # it says so in a usage.
    reached = [
        (request, result)
        for request, result in submitted
        if result.sent and (result.status == "ok" or result.usage is not None)
    ]
    if not reached:
        return None
    model = str(reached[0][0].body.get("model") or config.provider.model)
    price = price_for(config, model)
    floor = 0 if price is None else price.min_cached_tokens
    prompt = cached = output = 0
    for request, result in reached:
        tokens = prompt_tokens(request.body, counter, config.turn_context.image_token_cost)
        prompt += tokens
        cached += estimate_cached_tokens(request, tokens, floor)
        written = [result.text or ""] + [f"{c.name}{c.arguments}" for c in result.tool_calls]
        output += sum(estimate_tokens(text) for text in written if text)
    figures = reply_tokens(
        usage, prompt=prompt, prompt_basis=counter.basis, cached=cached, output=output
    )
    cost = (
        None
        if price is None
        else price_tokens(
            price,
            prompt=figures.prompt,
            cached=figures.cached,
            cache_write=figures.cache_write,
            output=figures.output,
        )
    )
    return {
        "model": model,
        **figures.to_json(),
        "cost": cost,
        "currency": None if price is None else price.currency,
        # Why a prompt that a tokenizer plugin should have counted was estimated.
        "count_faults": list(counter.faults),
    }


def price_for(config: Config, model: str) -> ModelPrice | None:
    """The price table's row of ``model`` (``[prices."MODEL"]``), else ``None``."""
    return config.prices.get(model)


def price_tokens(
    price: ModelPrice, *, prompt: int, cached: int = 0, cache_write: int = 0, output: int = 0
) -> float:
    """What these tokens cost at ``price``, in its currency: the uncached prompt tokens at
    ``input``, the cached ones at ``cached_input``, those written to the cache at
    ``cache_write`` (each the input price when the row gives none), the output at ``output``.

    :raises ValueError: a negative count, or cached and written tokens over the prompt.
    """
    if min(prompt, cached, cache_write, output) < 0:
        raise ValueError("token counts cannot be negative")
    if cached + cache_write > prompt:
        raise ValueError(
            f"cached ({cached}) and cache-write ({cache_write}) tokens exceed the prompt ({prompt})"
        )
    cached_price = price.input if price.cached_input is None else price.cached_input
    write_price = price.input if price.cache_write is None else price.cache_write
    uncached = prompt - cached - cache_write
    return (
        uncached * price.input
        + cached * cached_price
        + cache_write * write_price
        + output * price.output
    ) / 1_000_000


def price_usage(usage: Usage, price: ModelPrice) -> float:
    """What one provider response cost at ``price``: its reported prompt, cached, cache-write and
    output tokens priced by :func:`price_tokens` (a field the provider left out counts 0).

    This is the function to show money with: ``price_usage(usage, price_for(config, model))``.
    """
    prompt = usage.prompt_tokens or 0
    cached = min(usage.cached_tokens or 0, prompt)
    written = min(usage.cache_creation_tokens or 0, prompt - cached)
    return price_tokens(
        price, prompt=prompt, cached=cached, cache_write=written, output=usage.output_tokens or 0
    )


def spend_totals(
    replies: Iterable[Mapping[str, Any]], *, price: ModelPrice | None, messages: int, answered: int
) -> dict[str, Any]:
    """Sum the figures of many replies (each a :meth:`ReplyTokens.to_json`) and price them.

    :param messages: the messages the replies answered among (for the figures per 1,000
        messages).
    :param answered: the replies delivered (for the figures per reply: what was spent, failed
        and silent requests included, over what reached the group).
    :returns: ``requests``, the four token totals, their ``basis`` (the weakest of each figure's),
        ``cost`` (``None`` without a price) and ``currency``, and ``per_reply`` and
        ``per_1000_messages`` holding the same figures divided.
    """
    rows = list(replies)
    names = ("prompt_tokens", "cached_tokens", "cache_write_tokens", "output_tokens")
    totals: dict[str, Any] = {"requests": len(rows)}
    for name in names:
        totals[name] = sum(int(row[name]) for row in rows)
    totals["basis"] = {
        figure: weakest_basis(row["basis"][figure] for row in rows) if rows else ESTIMATED
        for figure in ("prompt", "cached", "cache_write", "output")
    }
    totals["cost"] = (
        None
        if price is None
        else price_tokens(
            price,
            prompt=totals["prompt_tokens"],
            cached=totals["cached_tokens"],
            cache_write=totals["cache_write_tokens"],
            output=totals["output_tokens"],
        )
    )
    totals["currency"] = None if price is None else price.currency
    figures = (*names, "cost")
    totals["per_reply"] = _divided(totals, figures, answered)
    totals["per_1000_messages"] = _divided(totals, figures, messages / 1000 if messages else 0)
    return totals


def _divided(totals: Mapping[str, Any], names: Sequence[str], by: float) -> dict[str, Any] | None:
    if not by:
        return None
    return {name: None if totals[name] is None else totals[name] / by for name in names}


def format_money(amount: float | None, currency: str | None) -> str:
    """``0.0123 USD``: four significant digits, enough for a reply's fraction of a cent."""
    if amount is None or currency is None:
        return "no price"
    if amount == 0:
        return f"0 {currency}"
    digits = max(2, 3 - math.floor(math.log10(abs(amount))))
    return f"{amount:,.{digits}f} {currency}"
