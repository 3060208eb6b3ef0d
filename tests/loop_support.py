"""What the live-loop tests share: messages, a scripted model, a recording transport."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from promptweave import (
    BotLoop,
    ChatMessage,
    Config,
    IncomingEvent,
    PhrasePool,
    Promptweave,
    ProviderRequest,
    Stores,
    SubmitResult,
    hookimpl,
)
from promptweave.config import LoopConfig, RoutingConfig

T0 = dt.datetime(2026, 11, 28, 20, 0, tzinfo=dt.UTC)
BOT = "10001"
GROUP = "20001"
_ids = itertools.count(5000)


def message(
    text: str,
    *,
    sender: str = "30001",
    name: str = "青柠汽水",
    at: dt.datetime | None = None,
    addressed: bool = False,
    reply_to: str | None = None,
    message_id: str | None = None,
) -> ChatMessage:
    return ChatMessage(
        id=message_id or str(next(_ids)),
        sender_id=sender,
        sender_name=name,
        text=text,
        time=at or T0,
        addressed=addressed,
        reply_to=reply_to,
    )


def event(
    text: str,
    *,
    group: str | None = GROUP,
    role: str = "member",
    **fields: Any,
) -> IncomingEvent:
    return IncomingEvent(
        platform="onebot",
        bot_id=BOT,
        group_id=group,
        message=message(text, **fields),
        sender_role=role,
    )


Answer = str | SubmitResult | BaseException | Callable[[ProviderRequest], Any]


@attrs.define(eq=False)
class ScriptedModel:
    """A ``submit_request_async`` plugin answering from a script, recording every request.

    Each answer is a text, a ready :class:`SubmitResult`, an exception to raise, or a callable of
    the request (sync or async) giving one of those. The last answer repeats.
    """

    answers: list[Answer]
    requests: list[ProviderRequest] = attrs.field(factory=list)

    @hookimpl
    def submit_request_async(self, request: ProviderRequest, config: Config) -> Any:
        return self._answer(request)

    async def _answer(self, request: ProviderRequest) -> SubmitResult:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if callable(answer) and not isinstance(answer, BaseException):
            answer = answer(request)
            if asyncio.iscoroutine(answer):
                answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, SubmitResult):
            return answer
        return SubmitResult(sent=True, status="ok", text=str(answer))


@attrs.define(eq=False)
class RecordingTransport:
    """A OneBot v11 transport that records every API call and answers with message ids."""

    platform: str = "onebot.v11"
    calls: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)
    fail_on: set[int] = attrs.field(factory=set)  # call numbers (1-based) that raise
    _ids: Iterable[int] = attrs.field(factory=lambda: itertools.count(9001))

    async def call_api(self, api: str, **params: Any) -> Any:
        self.calls.append((api, params))
        if len(self.calls) in self.fail_on:
            raise ConnectionError("the platform went away")
        return {"message_id": next(self._ids)}  # type: ignore[call-overload]

    def texts(self) -> list[str]:
        return [
            "".join(seg["data"]["text"] for seg in params["message"] if seg["type"] == "text")
            for _, params in self.calls
        ]


def make_loop(
    *answers: Answer,
    config: Config | None = None,
    plugins: Iterable[object] = (),
    contrib: Iterable[str] = (),
    rng_seed: int = 1,
    **loop_fields: Any,
) -> tuple[BotLoop, ScriptedModel]:
    """A loop on in-memory stores with a scripted model; no pauses between bubbles."""
    import random

    model = ScriptedModel(answers=list(answers) or ["好的"])
    config = config or Config(
        routing=RoutingConfig(low_engagement=False), loop=LoopConfig(turn_deadline_s=5.0)
    )
    runtime = Promptweave.from_config(
        config,
        extra_plugins=[model, *plugins],
        contrib=contrib,
        stores=Stores.in_memory(),
        rng=random.Random(rng_seed),
        clock=lambda: T0,
    )

    async def no_pause(_seconds: float) -> None:
        return None

    return BotLoop(runtime=runtime, sleep=no_pause, **loop_fields), model


class AlwaysPhrase:
    """A plugin whose one phrase pool offers ``确实`` to every low-engagement exit."""

    @hookimpl
    def register_low_engagement_pools(self, register):  # type: ignore[no-untyped-def]
        register(PhrasePool(name="only_this", phrases=("确实",)))


class Certain:
    """A random source whose draws always succeed (probabilities are compared with ``<``)."""

    def random(self) -> float:
        return 0.0

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        import random

        return getattr(random.Random(0), name)
