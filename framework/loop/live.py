"""The live loop: one incoming event in, bubbles out, what was delivered recorded (``docs/bot.md``).

:class:`BotLoop` owns the whole path of a running bot::

    parse ─► record ─► route ─► pass: the low-engagement phrase, or silence
                            └─► reply / follow_up / tool: retrieve, assemble, turn context,
                                provider request, submit (tool rounds) ─► read the answer
                                ─► deliver ─► record what was delivered

Turns of one conversation (a bot in a group, or a bot and one user in private) run one at a time
in arrival order; conversations run concurrently, at most ``[loop] max_in_flight`` turns at once.
A message that arrives while its conversation's turn is in flight is recorded at once (so the
group log and the next timeline have it) and routed when that turn ends. Nothing here raises for a
malformed event or a failing plugin, provider or send: the turn ends in silence and the outcome's
trace says why, and only what was actually sent is recorded as delivered.

Routing awaits nothing, so a message whose conversation is idle is routed in the caller's task
when a slot is free; only a turn that goes on to speak (or waits behind another) runs in a task of
its conversation. Most messages of a group are passed over, and that path then costs no task.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from promptweave.decision import Decision, TurnAction
from promptweave.delivery.mention import MentionCooldown
from promptweave.delivery.outgoing import DeliveryPlan, ModelAnswer, SendReceipt, Transport
from promptweave.delivery.plan import plan_phrase
from promptweave.items import RouteHints, ToolContext
from promptweave.loop.events import IncomingEvent, OutcomeStatus, TurnOutcome
from promptweave.loop.quoted import QuotedFetches
from promptweave.loop.tools import ToolRunner
from promptweave.loop.turn_log import record_turn
from promptweave.messages.builder import TurnMessages
from promptweave.messages.wording import WORDING_HINT_SOURCE
from promptweave.pipeline.stages import TurnPipeline
from promptweave.plugins.watchdog import (
    Deadline,
    PluginFault,
    PluginHungError,
    cut,
    turn_faults,
    type_name,
)
from promptweave.providers.cost import reply_spend
from promptweave.providers.exchange import ProviderSpec
from promptweave.providers.failures import deadline_failure, model_failure
from promptweave.providers.tools import with_tool_round, with_tools
from promptweave.runtime import Promptweave
from promptweave.timing import elapsed_ms
from promptweave.turn import SpeakTrigger, Turn

__all__ = ["BotLoop"]

log = logging.getLogger("promptweave.loop")

Sleep = Callable[[float], Awaitable[None]]

#: Conversations whose last tool results are kept for their next turn.
TOOL_RESULT_CONVERSATIONS = 4096


@attrs.frozen(kw_only=True)
class _Queued:
    """An event waiting behind its conversation's turn in flight."""

    event: IncomingEvent
    transport: Transport
    future: asyncio.Future[TurnOutcome]
    record_ms: float
    faults: Deadline | None


@attrs.define(eq=False)
class _Lane:
    """One conversation's waiting events and the task working through them."""

    queue: deque[_Queued] = attrs.field(factory=deque)
    worker: asyncio.Task[None] | None = None
    #: Messages turned away since the queue last had room: the first is logged, the others are
    #: counted and said in one line once it has room again, or the conversation's work ends.
    dropped: int = 0


class _Stage:
    """The stage a turn is in, so a deadline can say where it stopped; each stage's milliseconds
    go into ``durations``."""

    def __init__(self, durations: dict[str, float]) -> None:
        self.name = "route"
        self.durations = durations
        self._start = time.perf_counter()

    def enter(self, name: str) -> None:
        now = time.perf_counter()
        self.durations[self.name] = round((now - self._start) * 1000, 3)
        self.name, self._start = name, now


@attrs.define(eq=False)
class _TurnRun:
    """One turn on its way: what every stage after routing reads and adds to.

    ``durations`` starts with ``record``; the stages and ``total`` are added when the turn ends,
    and it is the outcome's ``stage_durations_ms`` (built once, not copied per stage).
    """

    event: IncomingEvent
    turn: Turn
    #: Carries the turn through the stages: routed here, the rest for a turn that speaks.
    pipeline: TurnPipeline
    tools: ToolRunner | None
    stage: _Stage
    trace: dict[str, Any]
    durations: dict[str, float]
    started: float
    #: The event loop's time at which the turn's deadline falls.
    deadline_at: float
    #: The turn's plugin faults, and the budget of its routing (each later stage renews it).
    faults: Deadline

    def outcome(
        self, status: str, reason: str, decision: Decision | None = None, **fields: Any
    ) -> TurnOutcome:
        return TurnOutcome(
            event=self.event,
            status=status,
            reason=reason,
            decision=decision,
            trace=self.trace,
            stage_durations_ms=self.durations,
            **fields,
        )

    def close(self) -> None:
        """Record the last stage's duration and the turn's total; name the turn's plugin faults
        in its trace (``plugin_faults``) and in one log line."""
        self.stage.enter("")
        self.durations.pop("", None)
        self.durations["total"] = elapsed_ms(self.started)
        _name_faults(self.trace, self.faults, self.event)


@attrs.define(eq=False)
class BotLoop:
    """Carries incoming events through a :class:`promptweave.Promptweave` to delivered bubbles.

    :param runtime: the runtime (its stores, plugins and configuration).
    :param spec: the provider request format; ``[provider]`` by default.
    :param sleep: waits between bubbles; tests pass a no-op.
    :param fallback_names: names of the bot where ``[bots."ID"]`` gives none (a bot framework's
        nicknames), before the persona pack's.
    :param learn: run the learner stage in the background while events arrive (from the first
        event on, every ``[learning] tick_s``; ``docs/learning.md``). A replay drives the learners
        itself, on the log's clock, and passes ``False``.
    """

    runtime: Promptweave
    spec: ProviderSpec = attrs.field(
        default=attrs.Factory(
            lambda self: ProviderSpec.from_config(self.runtime.config.provider), takes_self=True
        )
    )
    sleep: Sleep = asyncio.sleep
    fallback_names: tuple[str, ...] = ()
    learn: bool = True
    _learning: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _lanes: dict[tuple[str, str], _Lane] = attrs.field(factory=dict, init=False)
    _slots: asyncio.Semaphore | None = attrs.field(default=None, init=False)
    # The last tool round's results per conversation, for its next turn's tool_context section;
    # the least recently used conversations are forgotten past TOOL_RESULT_CONVERSATIONS.
    _tool_results: OrderedDict[tuple[str, str], tuple[str, ...]] = attrs.field(
        factory=OrderedDict, init=False
    )
    _closed: bool = attrs.field(default=False, init=False)
    # The platform's answers for quoted messages, per message id (docs/messages.md).
    _quoted: QuotedFetches = attrs.field(factory=QuotedFetches, init=False)
    _mentions: MentionCooldown = attrs.field(
        default=attrs.Factory(
            lambda self: MentionCooldown(self.runtime.config.delivery.mention_cooldown_s),
            takes_self=True,
        ),
        init=False,
    )

    # -- entry points ----------------------------------------------------------------------

    async def handle_payload(
        self, platform: str, payload: Any, bot_id: str, transport: Transport
    ) -> TurnOutcome:
        """Parse a raw platform event with the ``parse_event`` hook, then :meth:`handle` it.

        A payload no plugin parses, or one its plugin finds malformed, gives a ``rejected``
        outcome naming the problem.
        """
        runtime = self.runtime
        faults = runtime.watchdog.deadline()
        try:
            event = await runtime.hooks.aparse_event(
                platform, payload, bot_id, watchdog=runtime.watchdog, deadline=faults
            )
        except Exception as exc:
            log.warning("rejected a %s event: %s", platform, cut(str(exc)))
            return _rejected(cut(f"{type(exc).__name__}: {exc}"), faults)
        if event is None:
            if faults.faults:
                return _rejected("no plugin parsed the event (see plugin_faults)", faults)
            return _rejected(
                f"no plugin parses events of platform {platform!r} "
                "(contrib plugin 'onebot' handles 'onebot')",
                faults,
            )
        return await self._handle(event, transport, faults if faults.faults else None)

    async def handle(self, event: IncomingEvent, transport: Transport) -> TurnOutcome:
        """Record ``event`` and run its turn after those of its conversation that came before.

        :returns: what the turn did; it never raises for a failure of the turn.
        """
        return await self._handle(event, transport, None)

    async def _handle(
        self, event: IncomingEvent, transport: Transport, faults: Deadline | None
    ) -> TurnOutcome:
        start = time.perf_counter()
        if self._learning is None and self.learn and not self._closed:
            self._start_learning()
        if event.self_sent:
            self._record_own(event)
            return TurnOutcome(event=event, status=OutcomeStatus.RECORDED, reason="self_sent")
        # Recorded on arrival, not when its turn runs: a turn in flight in the same group must
        # not hide this message from the group log or from the next turn's timeline.
        self.runtime.recorder.record_message(event.bot_id, event.group_id, event.message)
        record_ms = elapsed_ms(start)
        if self._closed:
            return _dropped(event, "loop_closed")
        conversation = event.conversation
        lane = self._lanes.get(conversation)
        slots = self._slots_in_flight()
        if lane is None and not slots.locked() and "route" not in self.runtime.parts().off_loop:
            # Nothing of this conversation is in flight and a slot is free: route here and now.
            # The slot is taken without waiting, so nothing can slip in between. (A route that
            # runs off the loop's thread awaits it: its turn takes the lane like any other.)
            await slots.acquire()
            return await self._run_now(event, transport, record_ms, slots, faults)
        if lane is None:
            lane = self._lanes[conversation] = _Lane()
        if len(lane.queue) >= self.runtime.config.loop.queue_per_conversation:
            lane.dropped += 1
            if lane.dropped == 1:
                log.warning(
                    "conversation %s: queue full, message %s recorded but not answered; the "
                    "next ones turned away are counted in one line when the queue has room",
                    conversation,
                    event.message.id,
                )
            dropped = _dropped(event, "queue_full")
            record_turn(
                self.runtime.stores.turns,
                dropped,
                None,
                timezone=self.runtime.bot_for(event.bot_id).timezone,
            )
            return dropped
        _say_dropped(conversation, lane)
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        lane.queue.append(
            _Queued(
                event=event,
                transport=transport,
                future=future,
                record_ms=record_ms,
                faults=faults,
            )
        )
        if lane.worker is None or lane.worker.done():
            lane.worker = asyncio.create_task(self._work(conversation, lane))
        return await future

    async def aclose(self) -> None:
        """Stop taking events, wait for the turns already queued and stop the learners' task
        (a run in progress finishes in its thread; its cursor moves only if it completes)."""
        self._closed = True
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        await asyncio.gather(*workers, return_exceptions=True)
        self.runtime.background.wait()
        await self.stop_learning()

    async def stop_learning(self) -> None:
        """Stop the learners' background task; the next event starts it again (a run in
        progress finishes in its thread)."""
        task, self._learning = self._learning, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _start_learning(self) -> None:
        stage = self.runtime.learning
        if not stage.enabled:
            self.learn = False  # said once, at start-up, by the stage
            return
        self._learning = asyncio.get_running_loop().create_task(
            stage.serve(self.runtime.clock), name="promptweave-learning"
        )
        log.info(
            "learning in the background: %s (every %g s)",
            ", ".join(learner.name for learner in stage.plans),
            self.runtime.config.learning.tick_s,
        )

    # -- the conversation's worker -------------------------------------------------------------

    def _slots_in_flight(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.runtime.config.loop.max_in_flight)
        return self._slots

    async def _run_now(
        self,
        event: IncomingEvent,
        transport: Transport,
        record_ms: float,
        slots: asyncio.Semaphore,
        faults: Deadline | None,
    ) -> TurnOutcome:
        """Route ``event`` in the caller's task, holding a slot taken for it. A turn that ends in
        silence is done here; one that goes on becomes the task of a new lane of its
        conversation, which keeps the slot until the turn ends (so what arrives meanwhile waits
        behind it, as in :meth:`_work`)."""
        try:
            run, routed = await self._route(event, record_ms, faults)
        except Exception as exc:  # the loop's own fault must not stop the caller
            slots.release()
            return self._loop_failed(event, record_ms, exc)
        finally:
            # The caller's task is not the turn's: its faults are not collected there after.
            collecting = turn_faults.get()
            turn_faults.set(None)
        if isinstance(routed, TurnOutcome):
            slots.release()
            return routed
        future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
        lane = self._lanes[event.conversation] = _Lane()
        lane.worker = asyncio.create_task(
            self._work(event.conversation, lane, first=(run, routed, transport, future)),
            context=_collecting(collecting),
        )
        return await future

    async def _work(
        self,
        conversation: tuple[str, str],
        lane: _Lane,
        first: tuple[_TurnRun, Decision | _Prepared, Transport, asyncio.Future[TurnOutcome]]
        | None = None,
    ) -> None:
        slots = self._slots_in_flight()
        if first is not None:
            run, routed, transport, future = first
            try:
                outcome = await self._finish_safely(run, routed, transport)
            finally:
                slots.release()
            if not future.done():
                future.set_result(outcome)
        while lane.queue:
            queued = lane.queue.popleft()
            async with slots:
                try:
                    outcome = await self._turn(
                        queued.event, queued.transport, queued.record_ms, queued.faults
                    )
                except Exception as exc:  # the loop's own fault must not stop the worker
                    outcome = self._loop_failed(queued.event, queued.record_ms, exc)
            if not queued.future.done():
                queued.future.set_result(outcome)
        if self._lanes.get(conversation) is lane and not lane.queue:
            _say_dropped(conversation, lane)
            del self._lanes[conversation]

    async def _finish_safely(
        self, run: _TurnRun, routed: Decision | _Prepared, transport: Transport
    ) -> TurnOutcome:
        try:
            return await self._finish(run, routed, transport)
        except Exception as exc:  # the loop's own fault must not stop the worker
            return self._loop_failed(run.event, run.durations["record"], exc)

    # -- one turn --------------------------------------------------------------------------

    async def _turn(
        self,
        event: IncomingEvent,
        transport: Transport,
        record_ms: float,
        faults: Deadline | None = None,
    ) -> TurnOutcome:
        run, routed = await self._route(event, record_ms, faults)
        if isinstance(routed, TurnOutcome):
            return routed
        return await self._finish(run, routed, transport)

    async def _route(
        self, event: IncomingEvent, record_ms: float, faults: Deadline | None
    ) -> tuple[_TurnRun, TurnOutcome | Decision | _Prepared]:
        """Start the turn and route it: on the loop's thread when only trusted plugins route,
        else off it (:meth:`promptweave.plugins.watchdog.Watchdog.arun`). Gives the finished
        outcome of a turn that ends in silence, the plan of a low-engagement phrase, or the
        decision to speak.

        :param faults: the faults met parsing the event, if any: the turn's list starts with
            them.
        """
        started = time.perf_counter()
        durations = {"record": record_ms}
        stage = _Stage(durations)
        turn, tools = self._turn_for(event)
        pipeline = self.runtime.pipeline(turn)
        watchdog = self.runtime.watchdog
        routing = watchdog.deadline() if faults is None else faults.renewed()
        # The hooks this turn calls on the event loop (submit) note their faults here.
        turn_faults.set(routing)
        run = _TurnRun(
            event=event,
            turn=turn,
            pipeline=pipeline,
            tools=tools,
            stage=stage,
            trace={},
            durations=durations,
            started=started,
            deadline_at=asyncio.get_running_loop().time()
            + self.runtime.config.loop.turn_deadline_s,
            faults=routing,
        )
        decision = await watchdog.arun(
            lambda: pipeline.decide(routing),
            routing,
            off_loop="route" in pipeline.parts.off_loop,
        )
        run.trace["decision"] = decision.trace()
        if decision.action is not TurnAction.PASS:
            return run, decision
        phrase = decision.low_engagement_phrase
        if phrase:
            plan = plan_phrase(
                phrase,
                bot_id=event.bot_id,
                group_id=event.group_id,
                user_id=event.message.sender_id,
            )
            return run, _Prepared(decision=decision, plan=plan, answer=None, kind="phrase")
        outcome = run.outcome(OutcomeStatus.SILENT, decision.reason or "pass", decision)
        run.close()
        return run, self._logged(run, outcome)

    async def _finish(
        self, run: _TurnRun, routed: Decision | _Prepared, transport: Transport
    ) -> TurnOutcome:
        """Everything after routing: the reply's preparation under the turn's deadline (counted
        from the turn's start), then delivery."""
        prepared: _Prepared | TurnOutcome
        if isinstance(routed, Decision):
            try:
                async with asyncio.timeout_at(run.deadline_at):
                    prepared = await self._prepare(run, routed, transport)
            except TimeoutError:
                deadline_s = self.runtime.config.loop.turn_deadline_s
                log.warning(
                    "message %s: turn deadline reached in stage %s",
                    run.event.message.id,
                    run.stage.name,
                )
                run.trace["deadline"] = {"stage": run.stage.name, "s": deadline_s}
                waited = deadline_failure(run.stage.name, deadline_s)
                if waited is not None:
                    run.trace["model_failure"] = waited.to_json()
                prepared = run.outcome(OutcomeStatus.FAILED, "deadline")
        else:
            prepared = routed
        if isinstance(prepared, TurnOutcome):
            run.close()
            return self._logged(run, prepared)
        run.stage.enter("deliver")
        outcome = await self._deliver(run, prepared, transport)
        if prepared.after_delivery is not None:
            run.stage.enter("spend")
            await self._after_delivery(run, prepared.after_delivery)
        run.close()
        return self._logged(run, outcome)

    async def _after_delivery(self, run: _TurnRun, work: Callable[[], Awaitable[None]]) -> None:
        """The turn's bookkeeping once its bubbles are out, within the turn's deadline: a
        tokenizer plugin that hangs holds neither the conversation nor the reply (the figures
        are then missing from the trace, and the log says why)."""
        try:
            async with asyncio.timeout_at(run.deadline_at):
                await work()
        except TimeoutError:
            log.warning(
                "message %s: turn deadline reached while counting the reply's tokens; its "
                "spend is not recorded",
                run.event.message.id,
            )

    def _loop_failed(self, event: IncomingEvent, record_ms: float, exc: Exception) -> TurnOutcome:
        """The outcome of a turn the loop's own fault ended, written to the turn log too."""
        outcome = _loop_error(event, record_ms, exc)
        record_turn(
            self.runtime.stores.turns,
            outcome,
            None,
            timezone=self.runtime.bot_for(event.bot_id).timezone,
        )
        return outcome

    def _logged(self, run: _TurnRun, outcome: TurnOutcome) -> TurnOutcome:
        """Write the finished turn to the store's turn log (``docs/dashboard.md``)."""
        rendered = run.pipeline.rendered
        record_turn(
            self.runtime.stores.turns,
            outcome,
            None if rendered is None else rendered.sections,
            timezone=run.turn.bot.timezone,
            trigger=None if run.turn.trigger is None else run.turn.trigger.value,
        )
        return outcome

    def _turn_for(self, event: IncomingEvent) -> tuple[Turn, ToolRunner | None]:
        bot = self.runtime.bot_for(event.bot_id, self.fallback_names)
        message = event.message
        # No tool registered: nothing to permit, require or offer.
        tools = ToolRunner.for_event(self.runtime, event) if self.runtime.registries.tools else None
        permitted = tools.permitted_names() if tools is not None else ()
        intent = (
            tools.required_by(message.text)
            if tools is not None and (message.addressed or event.group_id is None)
            else None
        )
        background = self._tool_results.get(event.conversation, ())
        turn = Turn(
            bot=bot,
            message=message,
            group_id=event.group_id,
            trigger=_trigger(bot.id, bot.name, bot.aliases, message),
            route_hints=RouteHints(tool_intent=intent, tools_permitted=bool(permitted)),
            tool_context=ToolContext(
                background_events=background, action_tools_enabled=bool(intent)
            )
            if background or intent
            else None,
            quoted_message=event.quoted,
        )
        return turn, tools

    async def _quoted_images(self, run: _TurnRun, transport: Transport) -> None:
        """Ask the platform for the quoted message when neither the event nor the store had it
        (``fetch_message``, cached, within ``[loop] quoted_fetch_timeout_s``): its images join
        the turn before it is rendered, and the trace says what the platform said."""
        pipeline = run.pipeline
        message_id = pipeline.quoted_pending()
        if message_id is None:
            return
        run.stage.enter("quoted")
        fetched = await self._quoted.fetch(
            self.runtime.plugins.hooks,
            message_id,
            bot_id=run.event.bot_id,
            group_id=run.event.group_id,
            transport=transport,
            timeout_s=self.runtime.config.loop.quoted_fetch_timeout_s,
            watchdog=self.runtime.watchdog,
            deadline=run.faults.renewed(),
        )
        pipeline.quoted_fetched(fetched.trace(), fetched.images)
        run.trace["quoted"] = fetched.trace()

    async def _prepare(
        self, run: _TurnRun, decision: Decision, transport: Transport
    ) -> _Prepared | TurnOutcome:
        """Everything of a reply before sending, under the turn's deadline: the pipeline's
        stages after routing, with the tool rounds between submissions."""
        runtime, event, pipeline, stage, trace = (
            self.runtime,
            run.event,
            run.pipeline,
            run.stage,
            run.trace,
        )
        await self._quoted_images(run, transport)
        stage.enter("render")
        watchdog, off_loop = runtime.watchdog, pipeline.parts.off_loop
        assembling = run.faults.renewed()
        await pipeline.aretrieve(assembling)

        def assemble() -> tuple[Any, Any, Any]:
            # One stage: the sections, messages, turn context and request, in one worker call
            # when a plugin not shipped with promptweave takes part (no thread hop per hook).
            rendered = pipeline.assemble(assembling, None)
            stage.enter("turn_context")
            context = pipeline.build_turn_context()
            stage.enter("request")
            return rendered, context, pipeline.build_request(self.spec)

        rendered, context, request = await watchdog.arun(
            assemble, assembling, off_loop="render" in off_loop
        )
        trace["chars"] = _chars(runtime.config.budget.chars, rendered.sections, context.messages)
        if pipeline.built is not None:
            trace["wording_hints"] = _wording_hints(pipeline.built)
        tools = run.tools
        # Every turn of a conversation offers the same tools (those the speaker is permitted),
        # not only tool turns: the tools sit before the messages in the body, and a list that
        # came and went would break the cached prefix there (docs/cost.md).
        offered = tools.specs() if tools is not None else ()
        if offered:
            request = with_tools(request, offered)
        stage.enter("submit")
        usage: list[Any] = []
        result = await pipeline.submit(request)
        usage.append(result.usage)
        submitted = [(request, result)]
        rounds = 0
        while result.status == "ok" and result.tool_calls and offered and tools is not None:
            if rounds >= runtime.config.loop.tool_rounds:
                trace["tools_stopped"] = f"after {rounds} rounds"
                break
            rounds += 1
            stage.enter("tools")
            answered = await tools.run(result.tool_calls, trace)
            self._remember_tool_results(event.conversation, tools.background_lines(answered))
            request = with_tool_round(request, offered, result.tool_calls, answered)
            stage.enter("submit")
            result = await pipeline.submit(request)
            usage.append(result.usage)
            submitted.append((request, result))
        trace["submit"] = {
            "status": result.status,
            "detail": None if result.detail is None else cut(result.detail),
            "rounds": rounds,
        }
        total_usage = _sum_usage(usage)
        counting = (
            runtime.config,
            submitted,
            total_usage,
            runtime.plugins.hooks.token_counter(runtime.config),
        )
        counted_off_loop = runtime.plugins.hooks.implemented("count_tokens")

        async def count_spend() -> None:
            # A tokenizer plugin may ask a server: off the event loop, as the submission is.
            trace["tokens"] = (
                await asyncio.to_thread(reply_spend, *counting)
                if counted_off_loop
                else reply_spend(*counting)
            )

        # Its place in the trace now; counted before the reply is delivered only when there will
        # be no reply (the first bubble does not wait for bookkeeping, docs/performance.md).
        trace["tokens"] = None
        failure = model_failure(result)
        if failure is not None:
            # Why the model gave nothing, and the fix: the bot's log, the replay (docs/bot.md).
            trace["model_failure"] = failure.to_json()
        if result.status != "ok" or result.text is None:
            await count_spend()
            return run.outcome(
                OutcomeStatus.FAILED if result.status != "offline" else OutcomeStatus.SILENT,
                "provider_error" if result.status != "offline" else "offline",
                decision,
                request=request,
                usage=total_usage,
            )

        stage.enter("read")
        text = result.text
        mention_allowed = self._mentions.allows(event.bot_id, event.group_id, runtime.clock())

        def read() -> tuple[ModelAnswer, DeliveryPlan | None]:
            answer = pipeline.read_answer(text, trace)
            if answer.silent or not answer.bubbles:
                return answer, None
            return answer, pipeline.plan_delivery(
                answer, mention_allowed=mention_allowed, trace=trace
            )

        answer, plan = await watchdog.arun(read, run.faults.renewed(), off_loop="read" in off_loop)
        if plan is None:
            await count_spend()
            return run.outcome(
                OutcomeStatus.SILENT,
                f"model_{answer.reason or 'empty'}",
                decision,
                request=request,
                usage=total_usage,
            )
        return _Prepared(
            decision=decision,
            plan=plan,
            answer=answer,
            kind="reply",
            request=request,
            usage=total_usage,
            after_delivery=count_spend,
        )

    def _remember_tool_results(self, conversation: tuple[str, str], lines: tuple[str, ...]) -> None:
        self._tool_results[conversation] = lines
        self._tool_results.move_to_end(conversation)
        while len(self._tool_results) > TOOL_RESULT_CONVERSATIONS:
            self._tool_results.popitem(last=False)

    # -- delivery --------------------------------------------------------------------------

    async def _deliver(
        self, run: _TurnRun, prepared: _Prepared, transport: Transport
    ) -> TurnOutcome:
        sent: list[tuple[str, str | None, str | None]] = []  # text, message id, quoted id
        sends: list[dict[str, Any]] = []
        sending = run.faults.renewed()
        for message in prepared.plan.messages:
            if message.pause_s > 0:
                await self.sleep(message.pause_s)
            receipt = await self._send(message, transport, sending)
            text = "".join(
                seg.data.get("text", "") for seg in message.segments if seg.kind == "text"
            )
            quoted = next(
                (seg.data.get("id") for seg in message.segments if seg.kind == "reply"), None
            )
            sends.append(
                {"bubble": message.bubble_index, "ok": receipt.ok, "id": receipt.message_id}
                | ({"quoted": quoted} if quoted else {})
                | ({"detail": cut(receipt.detail)} if receipt.detail else {})
            )
            if not receipt.ok:
                # A bubble that did not go out is not recorded, and the rest are not sent: half
                # an answer is worse than the part that reached the group.
                break
            if any(seg.kind == "at" for seg in message.segments):
                self._mentions.note(message.bot_id, message.group_id, self.runtime.clock())
            if text.strip():
                sent.append((text.strip(), receipt.message_id, quoted))
        run.trace["sends"] = sends
        self._record_delivered(run, sent, prepared.usage)
        if not sent:
            return run.outcome(
                OutcomeStatus.FAILED if sends else OutcomeStatus.SILENT,
                "send_failed" if sends else "nothing_to_send",
                prepared.decision,
                request=prepared.request,
                usage=prepared.usage,
            )
        status = OutcomeStatus.PHRASE if prepared.kind == "phrase" else OutcomeStatus.REPLIED
        return run.outcome(
            status,
            prepared.decision.reason,
            prepared.decision,
            bubbles=tuple(text for text, _, _ in sent),
            message_ids=tuple(message_id for _, message_id, _ in sent),
            request=prepared.request,
            usage=prepared.usage,
        )

    async def _send(self, message: Any, transport: Transport, deadline: Deadline) -> SendReceipt:
        """One bubble through ``send_message``: its synchronous part off the loop's thread for a
        plugin not shipped with promptweave, its send awaited for ``[loop] send_timeout_s``. A
        receipt of the wrong type is dropped (the bubble counts as sent, without an id), named
        in ``deadline``."""
        runtime = self.runtime
        watchdog = runtime.watchdog
        try:
            taken = await runtime.hooks.asend_message(
                message, transport, watchdog=watchdog, deadline=deadline
            )
            if taken is None:
                return SendReceipt(
                    ok=False, detail=f"no plugin sends to platform {transport.platform!r}"
                )
            plugin, pending = taken
            receipt = await watchdog.awaited(
                plugin,
                "hook send_message",
                pending,
                seconds=runtime.config.loop.send_timeout_s,
                deadline=deadline,
            )
        except PluginHungError as exc:
            return SendReceipt(ok=False, detail=f"send timed out: {exc}")
        except Exception as exc:
            log.warning("send failed: %s", cut(str(exc)))
            return SendReceipt(ok=False, detail=cut(f"{type(exc).__name__}: {exc}"))
        if not isinstance(receipt, SendReceipt):
            deadline.add(
                PluginFault(
                    plugin=plugin,
                    where="hook send_message",
                    kind="wrong_type",
                    detail=f"its send gave {type_name(receipt)}, expected SendReceipt; the "
                    "bubble counts as sent, without a message id",
                )
            )
            return SendReceipt(ok=True, detail=f"receipt of type {type_name(receipt)} dropped")
        return receipt

    def _record_delivered(
        self, run: _TurnRun, sent: list[tuple[str, str | None, str | None]], usage: Any
    ) -> None:
        """Record what reached the group: each bubble in the group log and the bot-reply context
        under its own id; the user's session keeps the answer once, its bubbles one a line, with
        the token usage the provider reported for it. Each bubble recorded is observed with what
        was injected into the reply (``observe_reply_delivered``)."""
        event = run.event
        reported = None
        if usage is not None:
            reported = {k: v for k, v in attrs.asdict(usage).items() if v is not None}
        # Worked out only when someone reads it: a plugin observing deliveries, or the learner
        # stage, which keeps it for negative feedback (docs/learning.md).
        injection = (
            run.pipeline.injection()
            if sent
            and (
                self.runtime.recorder.on_reply is not None
                or self.runtime.plugins.hooks.implemented("observe_reply_delivered")
            )
            else None
        )
        for index, (text, message_id, quoted) in enumerate(sent):
            self.runtime.recorder.record_bot_reply(
                event.bot_id,
                event.group_id,
                text,
                message_id=message_id,
                answering=event.message if index == 0 else None,
                session_text="\n".join(text for text, _, _ in sent) if index == 0 else None,
                quote_of=quoted,
                time=self.runtime.clock(),
                usage=reported if index == 0 else None,
                injection=injection,
                answered=event.message,
            )

    def _record_own(self, event: IncomingEvent) -> None:
        self.runtime.recorder.record_bot_reply(
            event.bot_id,
            event.group_id,
            event.message.text,
            message_id=event.message.id,
            time=event.message.time,
        )


@attrs.frozen(kw_only=True)
class _Prepared:
    decision: Decision
    plan: DeliveryPlan
    answer: ModelAnswer | None
    kind: str
    request: Any = None
    usage: Any = None
    #: Bookkeeping the delivery does not wait for (the reply's spend), done once it is over and
    #: before the turn is logged.
    after_delivery: Callable[[], Awaitable[None]] | None = None


def _trigger(bot_id: str, name: str, aliases: tuple[str, ...], message: Any) -> SpeakTrigger:
    if bot_id in message.mentions:
        return SpeakTrigger.MENTION
    if any(alias and alias in message.text for alias in (name, *aliases)):
        return SpeakTrigger.ALIAS
    if message.addressed:
        return SpeakTrigger.MENTION
    return SpeakTrigger.AMBIENT


def _sum_usage(usages: list[Any]) -> Any:
    found = [usage for usage in usages if usage is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    fields = attrs.fields_dict(type(found[0]))

    def total(name: str) -> int | None:
        values = [getattr(usage, name) for usage in found if getattr(usage, name) is not None]
        return sum(values) if values else None

    return type(found[0])(**{name: total(name) for name in fields})


#: The message kinds a request's characters are counted under (``PromptMessage.source``; the
#: wording hints' ``wording_hint:<kind>`` all count as ``wording_hints``).
MESSAGE_KINDS = ("ambient", "summary", "history", "wording_hints", "current")


def _wording_hints(built: TurnMessages) -> dict[str, Any]:
    """The wording hints of a turn for its trace: those sent and those the budget trimmed."""
    return {
        "sent": [hint.to_json() for hint in built.wording_hints],
        "trimmed": [hint.to_json() for hint in built.wording_hints_trimmed],
    }


def _chars(budget: int, sections: Any, messages: Any) -> dict[str, Any]:
    """Characters of what the turn sends: per system section, per message kind, the sidecar."""
    counted: dict[str, Any] = {"budget": budget, "system": {}, "sidecar": 0}
    counted.update(dict.fromkeys(MESSAGE_KINDS, 0))
    for section in sections:
        if section.chars:
            counted["system"][section.id] = section.chars
    for message in messages:
        kind = message.source if message.source in MESSAGE_KINDS else "history"
        if message.source.startswith(WORDING_HINT_SOURCE + ":"):
            kind = "wording_hints"
        counted[kind] += len(message.content)
        if message.api_content is not None:
            counted["sidecar"] += max(0, len(message.api_content) - len(message.content))
    return counted


def _loop_error(event: IncomingEvent, record_ms: float, exc: Exception) -> TurnOutcome:
    log.exception("turn of message %s failed", event.message.id, exc_info=exc)
    return TurnOutcome(
        event=event,
        status=OutcomeStatus.FAILED,
        reason="loop_error",
        trace={"error": f"{type(exc).__name__}: {exc}"},
        stage_durations_ms={"record": record_ms},
    )


def _rejected(reason: str, faults: Deadline | None = None) -> TurnOutcome:
    trace: dict[str, Any] = {}
    if faults is not None:
        _name_faults(trace, faults, None)
    return TurnOutcome(event=None, status=OutcomeStatus.REJECTED, reason=reason, trace=trace)


def _collecting(faults: Deadline | None) -> contextvars.Context:
    """A copy of this context in which the live loop's turn collects ``faults``."""
    context = contextvars.copy_context()
    context.run(turn_faults.set, faults)
    return context


def _name_faults(trace: dict[str, Any], faults: Deadline, event: IncomingEvent | None) -> None:
    """The turn's plugin faults in its trace, and in one log line naming each (the plugin, the
    hook, what it did), their details cut at
    :data:`promptweave.plugins.watchdog.DETAIL_MAX_CHARS`."""
    found = faults.trace()
    if not found:
        return
    trace["plugin_faults"] = found
    described = "; ".join(
        f"{f['where']} of plugin {f['plugin']!r} {f['kind']}: {f['detail']}" for f in found
    )
    message_id = event.message.id if event is not None else None
    log.warning("message %s: plugin faults: %s", message_id, described)


def _say_dropped(conversation: tuple[str, str], lane: _Lane) -> None:
    """The messages a full queue turned away after the one logged, in one line."""
    if lane.dropped > 1:
        log.warning(
            "conversation %s: %d more messages recorded but not answered while its queue was full",
            conversation,
            lane.dropped - 1,
        )
    lane.dropped = 0


def _dropped(event: IncomingEvent, reason: str) -> TurnOutcome:
    return TurnOutcome(event=event, status=OutcomeStatus.DROPPED, reason=reason)
