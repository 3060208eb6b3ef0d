"""The learning model: what the model learners, the session summary and the image descriptions
ask, and how its answers are checked (``docs/learning.md``, the learning model).

A learner describes what it asks as a :class:`ModelTask`: the prompt (from the persona pack's
``[learning_prompts.NAME]``, never from code), the input as JSON, and the answer's attrs record
with its JSON schema. :class:`LearningModel` sends it through the project's async provider clients
(their retries included), asking for structured output: ``response_format`` for an
OpenAI-compatible server (``[learning.model] structured``), a forced tool call for Anthropic. The
answer is parsed into the record through the project's cattrs converter, so the record's
validators hold; an invalid answer is traced, asked once more, and never stored.

Every call is counted against ``[learning.budget]`` (:class:`promptweave.learning.budget
.LearningBudget`) and traced as a :class:`ModelCall`. A learner's run sees its calls through a
:class:`RunModel`, which the stage attaches to the run's :class:`LearnerRun`.

The offline learning model (``client = "offline"``) answers each task with the task's own
deterministic rule (:attr:`ModelTask.offline`), as JSON text that is then checked like any answer;
it reports the tokens it estimates (a third of the UTF-8 bytes, rounded up), so the budget holds
offline too. It is no model and says so: its label names it in every report.
"""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import json
import math
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from promptweave._convert import structure
from promptweave.config import Config, LearningModelConfig
from promptweave.errors import ConfigError
from promptweave.learning.budget import BudgetSpent, LearningBudget, Spend
from promptweave.providers.exchange import ProviderApi, ProviderRequest, SubmitResult, Usage
from promptweave.providers.prefix import canonical_json
from promptweave.text.persona import PersonaPack

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "CALLS_KEPT",
    "OFFLINE_LABEL",
    "CallStatus",
    "LearningModel",
    "ModelCall",
    "ModelTask",
    "ModelUnavailable",
    "RunModel",
    "answer_schema",
    "build_request",
    "offline_usage",
]

A = TypeVar("A")

#: How reports name the offline learning model.
OFFLINE_LABEL = "offline learning model (deterministic rules, not an LLM)"
#: The most recent calls a model keeps for the trace and the report.
CALLS_KEPT = 1000
#: Attempts per task: the first, and one more after an invalid answer.
ANSWER_ATTEMPTS = 2
#: How much of an invalid answer the trace keeps.
ANSWER_PREVIEW_CHARS = 200

Submit = Callable[[ProviderRequest], Awaitable[SubmitResult]]


class CallStatus:
    """What became of one task."""

    OK = "ok"  # a valid answer
    INVALID = "invalid"  # no valid answer in ANSWER_ATTEMPTS tries: nothing stored
    ERROR = "error"  # the provider failed (after the client's own retries)
    BUDGET = "budget"  # not asked: a budget limit is reached


class ModelUnavailable(Exception):
    """The provider failed (after its client's retries): the run keeps its cursor and is tried
    again later.

    :param call: the failed call's trace.
    """

    def __init__(self, message: str, call: ModelCall | None = None) -> None:
        super().__init__(message)
        self.call = call


@attrs.frozen(kw_only=True)
class ModelTask(Generic[A]):
    """One question for the learning model.

    :param name: the task's name (``strategies``, ``members``…): the schema's name on the wire.
    :param answer: the attrs record the answer is parsed into.
    :param schema: the answer's JSON schema (an ``object``; strict-mode rules: every property
        required, ``additionalProperties`` false).
    :param system: the system prompt.
    :param user: the user message (the instruction, then the input as JSON).
    :param payload: the input, for the offline learning model's rule.
    :param offline: the offline learning model's answer to ``payload`` (JSON-safe), or ``None``
        when the task has no offline answer (the offline model then answers nothing).
    :param images: image URLs sent with the user message (a vision task).
    :param max_tokens: the answer's token limit; ``None``: ``[learning.model] max_tokens``.
    """

    name: str
    answer: type[A]
    schema: Mapping[str, Any]
    system: str
    user: str
    payload: Mapping[str, Any] = attrs.field(factory=dict)
    offline: Callable[[Mapping[str, Any]], Any] | None = None
    images: tuple[str, ...] = ()
    max_tokens: int | None = None


@attrs.frozen(kw_only=True)
class ModelCall:
    """One task asked (or not) of the learning model: for the trace, the log and the report.

    :param attempts: requests sent (an invalid answer is asked once more).
    :param spend: its calls and tokens (each request is one call).
    :param error: why it gave no answer.
    :param preview: the start of the last invalid answer.
    """

    task: str
    learner: str
    bot_id: str
    group_id: str
    at: dt.datetime
    status: str
    attempts: int = 0
    spend: Spend = attrs.field(factory=Spend)
    error: str = ""
    preview: str = ""
    duration_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "learner": self.learner,
            "bot_id": self.bot_id,
            "group_id": self.group_id,
            "at": self.at.isoformat(),
            "status": self.status,
            "attempts": self.attempts,
            "spend": self.spend.to_json(),
            "error": self.error,
            "preview": self.preview,
            "duration_ms": round(self.duration_ms, 3),
        }


def answer_schema(properties: Mapping[str, Any]) -> dict[str, Any]:
    """An ``object`` schema in strict-mode form: every property required, nothing else."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def offline_usage(request_text: str, answer_text: str) -> Usage:
    """What the offline learning model reports: a third of the UTF-8 bytes, rounded up (about
    a token per Chinese character, three or four ASCII characters a token)."""
    return Usage(
        prompt_tokens=math.ceil(len(request_text.encode()) / 3),
        output_tokens=math.ceil(len(answer_text.encode()) / 3),
        cached_tokens=0,
    )


def _image_parts(api: ProviderApi, images: Sequence[str]) -> list[dict[str, Any]]:
    if api is ProviderApi.ANTHROPIC:
        return [{"type": "image", "source": {"type": "url", "url": url}} for url in images]
    if api is ProviderApi.OPENAI_RESPONSES:
        return [{"type": "input_image", "image_url": url} for url in images]
    return [{"type": "image_url", "image_url": {"url": url}} for url in images]


def build_request(
    task: ModelTask[Any], settings: LearningModelConfig, api: ProviderApi, model: str
) -> ProviderRequest:
    """The request that asks ``task`` in format ``api``, for structured output."""
    max_tokens = task.max_tokens or settings.max_tokens
    text_type = "input_text" if api is ProviderApi.OPENAI_RESPONSES else "text"
    content: Any = task.user
    if task.images:
        content = [{"type": text_type, "text": task.user}, *_image_parts(api, task.images)]
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    if api is ProviderApi.ANTHROPIC:
        body |= {
            "max_tokens": max_tokens,
            "temperature": settings.temperature,
            "system": task.system,
            "messages": [{"role": "user", "content": content}],
            "tools": [
                {
                    "name": task.name,
                    "description": f"Record the answer ({task.name}).",
                    "input_schema": dict(task.schema),
                }
            ],
            "tool_choice": {"type": "tool", "name": task.name},
        }
        path = "/messages"
    elif api is ProviderApi.OPENAI_RESPONSES:
        body |= {
            "instructions": task.system,
            "input": [{"role": "user", "content": content}],
            "max_output_tokens": max_tokens,
            "temperature": settings.temperature,
            "text": {
                "format": {
                    "type": "json_schema",
                    "name": task.name,
                    "schema": dict(task.schema),
                    "strict": True,
                }
            },
        }
        path = "/responses"
    else:
        if settings.structured == "json_object":
            response_format: dict[str, Any] = {"type": "json_object", "schema": dict(task.schema)}
        else:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": task.name, "schema": dict(task.schema), "strict": True},
            }
        body |= {
            "messages": [
                {"role": "system", "content": task.system},
                {"role": "user", "content": content},
            ],
            "max_tokens": max_tokens,
            "temperature": settings.temperature,
            "response_format": response_format,
        }
        path = "/chat/completions"
    return ProviderRequest(
        api=api,
        path=path,
        body=body,
        conversation_key=f"learning:{task.name}",
        turn_id=f"learning:{task.name}",
        segments=(),
    )


def _answer_text(api: ProviderApi, result: SubmitResult, task: str) -> str:
    """The JSON text of an answer: a forced tool call's arguments (Anthropic), else the text."""
    for call in result.tool_calls:
        if call.name == task:
            return call.arguments
    return result.text or ""


def _parse(task: ModelTask[A], text: str) -> A:
    """``text`` as the task's record; raises ``ValueError`` saying what is wrong."""
    stripped = text.strip()
    if stripped.startswith("```"):  # a fenced block, which some servers add around JSON
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(stripped)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {type(data).__name__}")
    try:
        return structure(data, task.answer, f"answer of {task.name}")
    except ConfigError as exc:
        raise ValueError("; ".join(exc.problems) or str(exc)) from None


def _spend(usage: Usage | None, invalid: bool) -> Spend:
    if usage is None:
        return Spend(calls=1, invalid=int(invalid))
    return Spend(
        calls=1,
        invalid=int(invalid),
        prompt_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cached_tokens=usage.cached_tokens or 0,
    )


@attrs.define(eq=False)
class _LoopThread:
    """One event loop in a daemon thread, where the async clients' requests run (their
    connection pools belong to it), for learners that run in worker threads."""

    _loop: asyncio.AbstractEventLoop | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def run(self, coroutine: Coroutine[Any, Any, SubmitResult], timeout_s: float) -> SubmitResult:
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="promptweave-learning-model", daemon=True
                ).start()
                self._loop = loop
            loop = self._loop
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout=timeout_s)
        except TimeoutError:
            future.cancel()
            return SubmitResult(sent=True, status="error", detail=f"timeout after {timeout_s:g} s")

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)


@attrs.define(eq=False)
class LearningModel:
    """The learning model of one runtime (``runtime.learning.model``).

    :param settings: ``[learning.model]``.
    :param api: the format its requests are built in.
    :param model: the model name sent.
    :param submit: sends a request (an async client's ``asubmit``); ``None`` for the offline
        learning model.
    :param budget: what it may spend.
    :param label: how reports name it.
    :param clock: the time calls are counted at, when a caller gives none.
    """

    settings: LearningModelConfig
    api: ProviderApi
    model: str
    submit: Submit | None
    budget: LearningBudget
    label: str
    clock: Callable[[], dt.datetime] = attrs.field(default=lambda: dt.datetime.now(dt.UTC))
    calls: deque[ModelCall] = attrs.field(factory=lambda: deque(maxlen=CALLS_KEPT))
    listeners: list[Callable[[ModelCall], None]] = attrs.field(factory=list)
    _loop: _LoopThread = attrs.field(factory=_LoopThread, init=False)

    @property
    def offline(self) -> bool:
        return self.submit is None

    def ask(
        self,
        task: ModelTask[A],
        *,
        learner: str,
        bot_id: str,
        group_id: str,
        now: dt.datetime | None = None,
    ) -> tuple[A | None, ModelCall]:
        """Ask ``task`` and check the answer. Blocks (call it from a worker thread).

        :returns: the parsed answer (``None`` when no valid one came) and the call's trace.
        :raises BudgetSpent: a budget limit is reached (nothing was sent).
        :raises ModelUnavailable: the provider failed.
        """
        at = now or self.clock()
        self.budget.check(bot_id, group_id, at)
        start = time.perf_counter()
        request = build_request(task, self.settings, self.api, self.model)
        spend = Spend()
        error = preview = ""
        answer: A | None = None
        attempts = 0
        status = CallStatus.INVALID
        while attempts < ANSWER_ATTEMPTS:
            if attempts:
                # Asking again is a call like any: not past the budget.
                try:
                    self.budget.check(bot_id, group_id, at)
                except BudgetSpent as spent:
                    error += f"; not asked again: {spent}"
                    break
            attempts += 1
            result = self._send(request, task)
            if result.status != "ok":
                status, error = CallStatus.ERROR, result.detail or result.status
                if result.sent:
                    self._count(
                        spend, _spend(result.usage, invalid=False), learner, bot_id, group_id, at
                    )
                break
            text = _answer_text(self.api, result, task.name)
            try:
                answer = _parse(task, text)
            except ValueError as exc:
                self._count(
                    spend, _spend(result.usage, invalid=True), learner, bot_id, group_id, at
                )
                error, preview = str(exc), " ".join(text.split())[:ANSWER_PREVIEW_CHARS]
                continue
            self._count(spend, _spend(result.usage, invalid=False), learner, bot_id, group_id, at)
            status, error, preview = CallStatus.OK, "", ""
            break
        call = ModelCall(
            task=task.name,
            learner=learner,
            bot_id=bot_id,
            group_id=group_id,
            at=at,
            status=status,
            attempts=attempts,
            spend=spend,
            error=error,
            preview=preview,
            duration_ms=(time.perf_counter() - start) * 1000,
        )
        self._record(call)
        if status == CallStatus.ERROR:
            raise ModelUnavailable(f"learning model: {task.name}: {error}", call)
        return answer, call

    def note_budget(
        self,
        task: str,
        learner: str,
        bot_id: str,
        group_id: str,
        at: dt.datetime,
        spent: BudgetSpent,
    ) -> ModelCall:
        """Trace a task not asked because the budget is spent."""
        call = ModelCall(
            task=task,
            learner=learner,
            bot_id=bot_id,
            group_id=group_id,
            at=at,
            status=CallStatus.BUDGET,
            error=str(spent),
        )
        self._record(call)
        return call

    def _count(
        self, total: Spend, spent: Spend, learner: str, bot_id: str, group_id: str, at: dt.datetime
    ) -> None:
        """Count one request at once, so the next one (asking again) sees it in the budget."""
        total.add(spent)
        self.budget.record(bot_id, group_id, learner, at, spent)

    def _record(self, call: ModelCall) -> None:
        self.calls.append(call)
        for listener in self.listeners:
            listener(call)

    def _send(self, request: ProviderRequest, task: ModelTask[Any]) -> SubmitResult:
        if self.submit is None:
            return self._offline(request, task)
        coroutine = self.submit(request)
        if not inspect.iscoroutine(coroutine):
            raise TypeError("the learning model's client must return a coroutine")
        # The client's own attempts and waits come first; this bounds them all.
        deadline = self.settings.timeout_s * 4
        return self._loop.run(coroutine, deadline)

    @staticmethod
    def _offline(request: ProviderRequest, task: ModelTask[Any]) -> SubmitResult:
        if task.offline is None:
            return SubmitResult(
                sent=False,
                status="error",
                detail=f"the offline learning model has no rule for {task.name}",
            )
        text = canonical_json(task.offline(task.payload))
        return SubmitResult(
            sent=True,
            status="ok",
            text=text,
            usage=offline_usage(request.body_text(), text),
            raw={"model": OFFLINE_LABEL},
        )

    def close(self) -> None:
        self._loop.close()

    @classmethod
    def from_config(
        cls,
        config: Config,
        budget: LearningBudget,
        *,
        enabled_plugins: Sequence[str] = (),
        clock: Callable[[], dt.datetime] | None = None,
    ) -> tuple[LearningModel | None, str | None]:
        """The learning model ``[learning.model]`` describes, or ``None`` and why not.

        :param enabled_plugins: the names of the runtime's plugins (``auto`` follows the turns'
            client plugin).
        """
        settings = config.learning.model
        if not config.learning.enabled:
            return None, "[learning] enabled = false"
        if not settings.enabled:
            return None, "[learning.model] enabled = false"
        provider = config.provider
        api = ProviderApi(settings.api or provider.api)
        model = settings.model or provider.model
        client = settings.client
        if client == "auto":
            if "offline_model" in enabled_plugins:
                client = "offline"
            elif api is ProviderApi.ANTHROPIC and "anthropic_messages" in enabled_plugins:
                client = "anthropic_messages"
            elif api is not ProviderApi.ANTHROPIC and "openai_compat" in enabled_plugins:
                client = "openai_compat"
            else:
                return None, (
                    f'no learning model: client "auto" finds no client plugin of {api.value} '
                    "enabled, nor offline_model (set [learning.model] client)"
                )
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        if client == "offline":
            return cls(
                settings=settings,
                api=api,
                model=model,
                submit=None,
                budget=budget,
                label=OFFLINE_LABEL,
                **extra,
            ), None
        submit = _client(config, settings, api, client)
        label = f"{client} {model or '(default model)'}"
        return cls(
            settings=settings,
            api=api,
            model=model,
            submit=submit,
            budget=budget,
            label=label,
            **extra,
        ), None


@attrs.define(eq=False)
class RunModel:
    """The learning model as one learner run sees it (``LearnerBatch.model``): the run's scope
    and clock, and the calls it made, which the stage adds to its :class:`LearnerRun`."""

    model: LearningModel
    learner: str
    bot_id: str
    group_id: str
    now: dt.datetime
    calls: list[ModelCall] = attrs.field(factory=list)
    #: The runtime's persona pack, where the prompts of the tasks are read.
    persona: PersonaPack | None = None

    @property
    def label(self) -> str:
        return self.model.label

    @property
    def offline(self) -> bool:
        return self.model.offline

    @property
    def vision(self) -> bool:
        return self.model.settings.vision

    def ask(self, task: ModelTask[A]) -> A | None:
        """:meth:`LearningModel.ask` in the run's scope: the valid answer, or ``None``.

        :raises BudgetSpent: a budget limit is reached (the run waits; its cursor stays).
        :raises ModelUnavailable: the provider failed (the run fails; its cursor stays).
        """
        try:
            asked = self.model.ask(
                task, learner=self.learner, bot_id=self.bot_id, group_id=self.group_id, now=self.now
            )
        except BudgetSpent as spent:
            self.calls.append(
                self.model.note_budget(
                    task.name, self.learner, self.bot_id, self.group_id, self.now, spent
                )
            )
            raise
        except ModelUnavailable as failed:
            if failed.call is not None:
                self.calls.append(failed.call)
            raise
        self.calls.append(asked[1])
        return asked[0]


#: The contrib modules of the clients ``[learning.model] client`` names, imported by name
#: (``framework`` never imports ``contrib``), and the class each holds.
CLIENT_MODULES = {
    "openai_compat": ("promptweave.contrib.openai_compat", "OpenAICompatClient", "openai"),
    "anthropic_messages": (
        "promptweave.contrib.anthropic_messages",
        "AnthropicMessagesClient",
        "anthropic",
    ),
}


def _client(config: Config, settings: LearningModelConfig, api: ProviderApi, client: str) -> Submit:
    """The ``asubmit`` of the contrib client ``client``, on ``[learning.model]``'s endpoint."""
    same_api = ProviderApi(config.provider.api) is api
    base_url = settings.base_url or (config.provider.base_url if same_api else "")
    api_key = settings.api_key or (config.provider.api_key if same_api else "")
    provider = attrs.evolve(
        config.provider,
        api=api.value,
        base_url=base_url,
        api_key=api_key,
        timeout_s=settings.timeout_s,
    )
    module_name, class_name, extra = CLIENT_MODULES[client]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in ("httpx", "tenacity"):
            raise
        raise ConfigError(
            config.source,
            [
                f"[learning.model] client {client!r} needs httpx and tenacity: "
                f"pip install 'promptweave[{extra}]' @ $.learning.model.client"
            ],
        ) from exc
    submit: Submit = (
        getattr(module, class_name).from_config(attrs.evolve(config, provider=provider)).asubmit
    )
    return submit
