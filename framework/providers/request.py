"""Provider requests from one turn context, and their submission (``docs/turn_context.md``).

:func:`build_provider_request` turns a :class:`promptweave.turn_context.context.TurnContext` into the exact body of an
OpenAI Chat Completions, OpenAI Responses or Anthropic Messages request; :func:`submit_request`
hands it to the ``submit_request`` hook and :func:`asubmit_request` to ``submit_request_async``
(both offline by default).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from promptweave.messages.prompt_message import FetchedImage, ImageLimits
from promptweave.plugins.watchdog import NETWORK_BOUND_FACTOR
from promptweave.providers.bodies import (
    anthropic_messages_body,
    openai_chat_body,
    openai_responses_body,
)
from promptweave.providers.exchange import (
    ProviderApi,
    ProviderRequest,
    ProviderSpec,
    SubmitResult,
)
from promptweave.providers.prefix import (
    canonical_json,
    compare_request_prefix,
    labelled_segments,
)
from promptweave.providers.wire import WireMessage, images_to_send, wire_messages, wire_system
from promptweave.timing import elapsed_ms, stage_log
from promptweave.turn_context.conversation_state import message_fingerprint

if TYPE_CHECKING:
    from promptweave.config import Config
    from promptweave.plugins.door import Hooks
    from promptweave.plugins.watchdog import Watchdog
    from promptweave.turn_context.context import TurnContext
    from promptweave.turn_context.conversation_state import ConversationState

__all__ = [
    "HISTORY_SOURCES",
    "RequestParts",
    "asubmit_request",
    "build_provider_request",
    "new_bytes",
    "submit_request",
]


class RequestParts(Protocol):
    """The parts the provider-request stage uses; a :class:`promptweave.Promptweave` and a
    turn's :class:`promptweave.pipeline.stages.TurnParts` both have them."""

    @property
    def config(self) -> Config: ...
    @property
    def conversations(self) -> ConversationState: ...
    @property
    def watchdog(self) -> Watchdog: ...
    @property
    def hooks(self) -> Hooks: ...


log = logging.getLogger("promptweave")


#: Message sources that are history: what was said before (the rest is this turn's own).
HISTORY_SOURCES = frozenset({"history", "summary"})

_BUILDERS = {
    ProviderApi.OPENAI_CHAT: openai_chat_body,
    ProviderApi.OPENAI_RESPONSES: openai_responses_body,
    ProviderApi.ANTHROPIC: anthropic_messages_body,
}


def _fetch_all(
    parts: RequestParts, urls: tuple[str, ...], limits: ImageLimits
) -> tuple[dict[str, FetchedImage | None], list[dict[str, str]]]:
    fetched: dict[str, FetchedImage | None] = {}
    failures: list[dict[str, str]] = []
    for url in urls:
        image, fault = parts.hooks.fetch_image(
            url,
            limits,
            watchdog=parts.watchdog,
            seconds=parts.config.provider.timeout_s * NETWORK_BOUND_FACTOR,
        )
        reason = "no fetch_image implementation returned an image"
        if image is not None and (
            len(image.data) > limits.max_bytes or image.media_type not in limits.media_types
        ):
            # The limits bind whoever fetched: a plugin's 100 MB image is not sent either.
            reason = (
                f"fetch_image returned {len(image.data)} bytes of {image.media_type!r}, outside "
                f"the limits ({limits.max_bytes} bytes of {', '.join(limits.media_types)})"
            )
            image = None
        if fault is not None:
            log.warning("image %s not fetched: %s", url, fault.describe())
            # A fetch error is the plugin's answer ("image is larger than …"): its own words.
            reason = fault.detail if fault.kind == "raised" else fault.describe()
        fetched[url] = image
        if image is None:
            failures.append({"url": url, "reason": reason})
    return fetched, failures


def _item_bytes(item: Any) -> int:
    # The comma that introduces an item belongs to it, as in the prefix report.
    return len(canonical_json(item).encode()) + 1


def new_bytes(
    context: TurnContext,
    wired: Sequence[WireMessage],
    body: Mapping[str, Any],
    segments: Sequence[tuple[str, str]],
    previous: Sequence[str] | None,
) -> int:
    """The bytes of what is new in a request (:attr:`promptweave.providers.prefix.PrefixReport.new_bytes`).

    New are the system prompt's per-turn sections, every message that is the turn's own (the
    current message with its sidecar or parts, the ambient excerpt, wording hints, the timeline's
    images) and each history message the conversation's previous request did not carry, matched
    by role and clean content (``previous``: their :func:`message_fingerprint`; ``None``, no
    previous request: all of them).
    """
    turn_labels = {f"section {section_id}" for section_id, _ in context.turn_sections}
    total = sum(len(piece.encode()) for label, piece in segments if label in turn_labels)
    items = body.get("input") if "input" in body else body.get("messages")
    items = list(items or [])
    # The body's messages end with the wired ones (a Chat Completions system message before).
    offset = len(items) - len(wired)
    inserted = len(wired) - len(context.messages)  # the timeline's image message, if any
    carried = Counter(previous or ())
    position = 0
    for index, _message in enumerate(wired):
        if inserted and index == context.current_turn_user_idx:
            total += _item_bytes(items[offset + index])  # the timeline's images: this turn's
            continue
        message = context.messages[position]
        position += 1
        if message.source in HISTORY_SOURCES and previous is not None:
            fingerprint = message_fingerprint(message)
            if carried[fingerprint] > 0:
                carried[fingerprint] -= 1
                continue
        total += _item_bytes(items[offset + index])
    return total


def build_provider_request(
    parts: RequestParts,
    context: TurnContext,
    spec: ProviderSpec | None = None,
    *,
    record_prefix: bool = True,
) -> ProviderRequest:
    """Build the request of ``context`` for ``spec`` (default: ``[provider]`` of the config).

    Images the provider needs inline are fetched through the ``fetch_image`` hook; a failed fetch
    becomes ``[图片]`` and is traced. The body is compared with the conversation's previous
    request of the same API (:class:`promptweave.providers.prefix.PrefixReport` in ``prefix`` and the trace).

    :param record_prefix: remember this body as the conversation's latest request.
    """
    start = time.perf_counter()
    durations: dict[str, float] = {}
    spec = spec or ProviderSpec.from_config(parts.config.provider)
    urls = images_to_send(context, spec.supports_images)
    fetched: dict[str, FetchedImage | None] = {}
    failures: list[dict[str, str]] = []
    if spec.inline_images and urls:
        fetch_start = time.perf_counter()
        fetched, failures = _fetch_all(parts, urls, spec.image_limits)
        durations["request.images"] = elapsed_ms(fetch_start)
    timeline_sent: list[int] = []
    messages = wire_messages(
        context,
        supports_images=spec.supports_images,
        inline=spec.inline_images,
        fetched=fetched,
        on_timeline=timeline_sent.append,
    )
    body, labels = _BUILDERS[spec.api](
        wire_system(context), messages, model=spec.model, max_tokens=spec.max_tokens
    )
    if spec.prompt_cache_key and spec.api.takes_prompt_cache_key and context.prompt_cache_key:
        # Last in the body: the key is the same on every turn of a group, so it never shortens
        # the byte-identical prefix; the provider routes the request by it, it is not prompt text.
        body["prompt_cache_key"] = context.prompt_cache_key
    segments = tuple(labelled_segments(body, labels))
    body_text = canonical_json(body)
    body_bytes = body_text.encode()
    conversations = parts.conversations
    key, api = context.conversation_key, spec.api.value
    previous_messages = conversations.previous_messages(key, api)
    previous = (
        conversations.remember_request(
            key, api, body_bytes, [message_fingerprint(m) for m in context.messages]
        )
        if record_prefix
        else conversations.last_requests.get((key, api))
    )
    fresh = new_bytes(
        context, messages, body, segments, previous_messages if previous is not None else None
    )
    prefix = (
        compare_request_prefix(previous, segments, new_bytes=fresh)
        if previous is not None
        else None
    )
    trace: dict[str, Any] = {
        "api": spec.api.value,
        "model": spec.model,
        "supports_images": spec.supports_images,
        "images": {
            "sent": len(urls) - len(failures),
            "timeline": sum(timeline_sent),
            "inline": spec.inline_images,
            "failed": failures,
        },
        "request_bytes": len(body_bytes),
        "new_bytes": fresh,
        "prefix": prefix.to_json() if prefix is not None else None,
    }
    request = ProviderRequest(
        api=spec.api,
        path=spec.api.path,
        body=body,
        conversation_key=context.conversation_key,
        turn_id=context.turn_id,
        segments=segments,
        prefix=prefix,
        trace=trace,
        stage_durations_ms={"request": elapsed_ms(start), **durations},
        text_labels=labels,
        compared_with=previous,
    )
    # Serialized once here: the submission, the spend and the turn log read the same bytes.
    object.__setattr__(request, "_text", body_text)
    object.__setattr__(request, "_bytes", body_bytes)
    return request


def _remember_sent(parts: RequestParts, request: ProviderRequest) -> None:
    """Keep the body submitted (with its tools, or a tool round) as the conversation's latest
    request: the next turn is compared with what went on the wire, not with what was built.
    Taken before the hook runs, so a plugin that rewrites the body cannot change it."""
    parts.conversations.remember_request(
        request.conversation_key, request.api.value, request.body_bytes()
    )


def _settled(result: object, hook: str) -> SubmitResult:
    if result is None:
        return SubmitResult(sent=False, status="offline", detail=f"no {hook} implementation")
    if not isinstance(result, SubmitResult):
        log.error("%s returned %s, not a SubmitResult", hook, type(result).__name__)
        return SubmitResult(
            sent=False,
            status="error",
            detail=f"{hook} returned {type(result).__name__}, not a SubmitResult",
        )
    return result


def _failed(exc: Exception, hook: str) -> SubmitResult:
    log.error("%s raised", hook, exc_info=exc)
    return SubmitResult(sent=False, status="error", detail=f"{type(exc).__name__}: {exc}")


def submit_request(parts: RequestParts, request: ProviderRequest) -> SubmitResult:
    """Send ``request`` through the ``submit_request`` hook.

    An implementation that raises, answers something other than a :class:`SubmitResult` or
    takes longer than ``[provider] timeout_s`` times
    :data:`promptweave.plugins.watchdog.NETWORK_BOUND_FACTOR` gives an ``error`` result naming it
    rather than an exception, so one failed call never takes the bot down.
    """
    start = time.perf_counter()
    _remember_sent(parts, request)
    result, fault = parts.hooks.submit_request(
        request,
        parts.config,
        watchdog=parts.watchdog,
        seconds=parts.config.provider.timeout_s * NETWORK_BOUND_FACTOR,
    )
    if fault is not None:
        log.error("submit_request failed: %s", fault.describe())
        detail = fault.detail if fault.kind == "raised" else fault.describe()
        result = SubmitResult(sent=False, status="error", detail=detail)
    if result is None:
        result = SubmitResult(
            sent=False, status="offline", detail="no submit_request implementation"
        )
    submitted: SubmitResult = attrs.evolve(result, duration_ms=elapsed_ms(start))
    stage_log.debug("submit_request: %.3f ms (%s)", submitted.duration_ms, submitted.status)
    return submitted


async def asubmit_request(parts: RequestParts, request: ProviderRequest) -> SubmitResult:
    """Send ``request`` through the ``submit_request_async`` hook, without blocking the loop.

    When no implementation takes the request (every one returned ``None``), the
    ``submit_request`` hook answers instead, in a worker thread: a client that only speaks the
    synchronous hook still works, and with no client at all the result is the offline default.
    As :func:`submit_request`, a raising implementation (or one whose coroutine raises) gives a
    logged ``error`` result, never an exception; cancelling the caller cancels the request.
    """
    import asyncio  # here: the render command loads no event loop (docs/performance.md)

    start = time.perf_counter()
    _remember_sent(parts, request)
    hooks = parts.hooks
    name = "submit_request_async"
    try:
        pending = hooks.submit_request_async(request, parts.config, watchdog=parts.watchdog)
        if pending is None:
            name = "submit_request"
            answer = await asyncio.to_thread(hooks.submit_request_in_full, request, parts.config)
        elif inspect.isawaitable(pending):
            answer = await pending
        else:
            answer = pending
    except Exception as exc:
        result = _failed(exc, name)
    else:
        result = _settled(answer, name)
    submitted: SubmitResult = attrs.evolve(result, duration_ms=elapsed_ms(start))
    stage_log.debug("asubmit_request: %.3f ms (%s)", submitted.duration_ms, submitted.status)
    return submitted
