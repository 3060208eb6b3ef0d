"""Compression safety before a request: the size gate, the progress rule, re-anchoring
(``docs/design.md#preflight-estimate``, ``docs/design.md#re-anchoring-after-compression`` and
``docs/design.md#compression-progress``).

A compression rewrites the history: it drops, merges or summarises rows, so the current user
message moves. Everything that must land on that message (the sidecar stamp, the persisted "what
was sent") finds it again through :func:`reanchor_current_turn_user_idx`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from promptweave.messages.prompt_message import PromptMessage
from promptweave.text.rules import IMAGE_MARK
from promptweave.text.tokens import ESTIMATED, estimate_tokens
from promptweave.turn_context.sidecar import rewrite_content, sent_text

__all__ = [
    "USER_ORIGINATED_SOURCES",
    "Compressor",
    "PreflightPass",
    "PreflightResult",
    "compression_made_progress",
    "default_compress_messages",
    "estimate_messages_tokens_rough",
    "estimate_request_tokens",
    "is_user_originated",
    "reanchor_current_turn_user_idx",
    "run_preflight",
    "should_run_preflight_estimate",
]

#: Sources of rows a user actually wrote; every other source (an ambient excerpt, a summary, a
#: vision message) is synthetic and never becomes the current turn's anchor.
USER_ORIGINATED_SOURCES = frozenset({"history", "current"})
#: A pass must cut tokens below this share of before, else it is no progress
#: (docs/design.md#compression-progress: 5%).
PROGRESS_TOKEN_RATIO = 0.95
TRUNCATED_MARK = "…（已截断）"

#: ``compressor(messages, pass_number)`` returns the compressed list (or the same list).
Compressor = Callable[[Sequence[PromptMessage], int], Sequence[PromptMessage]]


def is_user_originated(message: PromptMessage) -> bool:
    """``True`` for a user row the user wrote (not a summary, excerpt or other synthetic row)."""
    return message.role == "user" and message.source in USER_ORIGINATED_SOURCES


def reanchor_current_turn_user_idx(messages: Sequence[PromptMessage], user_message: str) -> int:
    """Find the current turn's user message again after ``messages`` was rebuilt.

    Scans from the end: the last user-originated row whose content equals ``user_message`` exactly
    wins; with no exact match (a merge rewrote it), the last user-originated row. Synthetic rows
    never qualify, even as the fallback.

    :returns: the index, or ``-1`` when there is no user-originated row at all.
    """
    fallback = -1
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not is_user_originated(message):
            continue
        if message.content == user_message:
            return index
        if fallback == -1:
            fallback = index
    return fallback


def estimate_messages_tokens_rough(
    messages: Sequence[PromptMessage],
    image_token_cost: int = 1500,
    count: Callable[[str], int] = estimate_tokens,
) -> int:
    """The tokens of ``messages``: each message's role, text and parts counted by ``count``
    (the estimate, :func:`promptweave.text.tokens.estimate_tokens`, unless a tokenizer counts),
    plus a flat cost per image.

    The text is what is sent (the sidecar when it applies, and durable parts). An image costs
    ``image_token_cost`` whatever its size, so a huge inline image does not count as its bytes.
    """
    tokens = 0
    images = 0
    for message in messages:
        tokens += count(message.role) + count(sent_text(message)) + sum(map(count, message.parts))
        images += len(message.images)
    return tokens + images * image_token_cost


def estimate_request_tokens(
    system_prompt: str,
    messages: Sequence[PromptMessage],
    image_token_cost: int = 1500,
    extra_images: int = 0,
    count: Callable[[str], int] = estimate_tokens,
) -> int:
    """The full estimate of a request: the system prompt, the messages, and images the request
    adds besides the messages' own (``extra_images``: the group timeline's), each text counted
    by ``count``."""
    return (
        count(system_prompt)
        + estimate_messages_tokens_rough(messages, image_token_cost, count)
        + extra_images * image_token_cost
    )


def should_run_preflight_estimate(
    messages: Sequence[PromptMessage],
    protect_first: int,
    protect_last: int,
    threshold_tokens: int,
    image_token_cost: int = 1500,
    extra_images: int = 0,
    count: Callable[[str], int] = estimate_tokens,
) -> bool:
    """Whether the full estimate is worth running.

    True when there are more messages than a compression protects (``protect_first +
    protect_last + 1``), or when the cheap estimate already reaches the threshold: a few huge
    messages must trigger compression too, or the request hits the provider's hard limit
    (``docs/design.md#preflight-estimate``).
    """
    if len(messages) > protect_first + protect_last + 1:
        return True
    rough = estimate_messages_tokens_rough(messages, image_token_cost, count)
    return rough + extra_images * image_token_cost >= threshold_tokens


def compression_made_progress(
    orig_len: int, new_len: int, orig_tokens: int, new_tokens: int
) -> bool:
    """Whether a compression pass got anywhere: fewer messages, or tokens below 95% of before.

    Counting rows alone would call a pass that summarised 220 rows into 220 shorter rows
    "stuck"; a 5% floor stops passes that shave almost nothing. Zero tokens before is never
    token progress.
    """
    if new_len < orig_len:
        return True
    return orig_tokens > 0 and new_tokens < orig_tokens * PROGRESS_TOKEN_RATIO


@attrs.frozen(kw_only=True)
class PreflightPass:
    """One compression pass: sizes before and after, and whether it made progress."""

    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    progress: bool


@attrs.frozen(kw_only=True)
class PreflightResult:
    """What the preflight did.

    :param estimated: the full estimate ran (the gate opened).
    :param tokens: the estimate before any pass (0 when it did not run).
    :param basis: how its tokens were found: ``estimated`` or ``counted`` (by a ``count_tokens``
        plugin, every text of it; ``docs/cost.md``).
    :param passes: the compression passes, in order.
    :param outcome: ``skipped`` (gate closed), ``under_threshold``, ``compressed`` (now under the
        threshold), ``no_progress``, ``max_passes`` (still over after the last pass).
    """

    estimated: bool = False
    tokens: int = 0
    passes: tuple[PreflightPass, ...] = ()
    outcome: str = "skipped"
    basis: str = ESTIMATED

    @property
    def compressed(self) -> bool:
        """``True`` when a pass changed the messages."""
        return any(p.progress for p in self.passes)

    def to_json(self) -> dict[str, object]:
        return {
            "estimated": self.estimated,
            "tokens": self.tokens,
            "tokens_basis": self.basis,
            "outcome": self.outcome,
            "passes": [attrs.asdict(p) for p in self.passes],
        }


def run_preflight(
    messages: Sequence[PromptMessage],
    system_prompt: str,
    compress: Compressor,
    *,
    protect_first: int,
    protect_last: int,
    threshold_tokens: int,
    max_passes: int = 3,
    image_token_cost: int = 1500,
    extra_images: int = 0,
    count: Callable[[str], int] = estimate_tokens,
    basis: Callable[[], str] = lambda: ESTIMATED,
) -> tuple[list[PromptMessage], PreflightResult]:
    """Compress ``messages`` until the request is under ``threshold_tokens``.

    At most ``max_passes`` passes; stops at the first pass without progress
    (:func:`compression_made_progress`), since another would only spin.

    :param count: counts one text's tokens (the estimate by default; a
        :class:`promptweave.text.tokens.TokenTally` for a turn).
    :param basis: says afterwards how ``count`` found its figures (``estimated``, ``counted``).

    :returns: the (possibly compressed) messages and what happened.
    """
    current = list(messages)
    if not should_run_preflight_estimate(
        current,
        protect_first,
        protect_last,
        threshold_tokens,
        image_token_cost,
        extra_images,
        count,
    ):
        return current, PreflightResult()
    tokens = estimate_request_tokens(system_prompt, current, image_token_cost, extra_images, count)
    if tokens < threshold_tokens:
        return current, PreflightResult(
            estimated=True, tokens=tokens, outcome="under_threshold", basis=basis()
        )
    passes: list[PreflightPass] = []
    outcome = "max_passes"
    before_tokens = tokens
    for number in range(1, max_passes + 1):
        compressed = list(compress(current, number))
        after_tokens = estimate_request_tokens(
            system_prompt, compressed, image_token_cost, extra_images, count
        )
        progress = compression_made_progress(
            len(current), len(compressed), before_tokens, after_tokens
        )
        passes.append(
            PreflightPass(
                messages_before=len(current),
                messages_after=len(compressed),
                tokens_before=before_tokens,
                tokens_after=after_tokens,
                progress=progress,
            )
        )
        if not progress:
            outcome = "no_progress"
            break
        current, before_tokens = compressed, after_tokens
        if after_tokens < threshold_tokens:
            outcome = "compressed"
            break
    return current, PreflightResult(
        estimated=True, tokens=tokens, passes=tuple(passes), outcome=outcome, basis=basis()
    )


def _strip_images(message: PromptMessage) -> PromptMessage:
    marks = " ".join(IMAGE_MARK for _ in message.images)
    return rewrite_content(message, f"{message.content}\n{marks}".strip())


def default_compress_messages(
    messages: Sequence[PromptMessage], pass_number: int, *, protect_first: int, protect_last: int
) -> list[PromptMessage]:
    """The built-in compression, one step per pass, never touching the current user message.

    1. Images of earlier messages become ``[图片]`` (their sidecars are dropped: the content
       changed).
    2. Else the oldest half of the unprotected middle is dropped.
    3. Else (only protected rows are left) the longest earlier message is cut to a quarter.

    :returns: a new list; the same content when nothing can be compressed any more.
    """
    rows = list(messages)
    anchor = next((i for i in range(len(rows) - 1, -1, -1) if is_user_originated(rows[i])), -1)
    earlier = [i for i in range(len(rows)) if i != anchor]
    with_images = [i for i in earlier if rows[i].images]
    if with_images:
        for index in with_images:
            rows[index] = _strip_images(rows[index])
        return rows
    middle = list(range(protect_first, max(protect_first, len(rows) - protect_last)))
    middle = [i for i in middle if i != anchor]
    if middle:
        dropped = set(middle[: max(1, len(middle) // 2)])
        return [row for i, row in enumerate(rows) if i not in dropped]
    if not earlier:
        return rows
    longest = max(earlier, key=lambda i: len(sent_text(rows[i])))
    text = rows[longest].content
    if len(text) < 4 * len(TRUNCATED_MARK):
        return rows
    rows[longest] = rewrite_content(
        rows[longest], text[: len(text) // 4] + TRUNCATED_MARK, rows[longest].images
    )
    return rows
