"""The router: gates, then reply necessity, then the decide rules
(``docs/design.md#the-routing-flow``).

Every stage is made of :class:`promptweave.DecisionRule` contributions; this module only runs them
in order, applies what they ask of the routing state, and completes the decision with the memory
policy, the low-engagement exit, the turn policy and the reply shape. A rule that raises or
returns the wrong type is left out and noted in the decision; the turn goes on.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import random
import zoneinfo
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from promptweave._dates import shifted
from promptweave.config import Config
from promptweave.decision import (
    Decision,
    GateSkip,
    NecessityScore,
    RouteContext,
    ScoreTerm,
    SocialAction,
    TurnAction,
)
from promptweave.plugins.contributions import DecisionRule, RuleStage
from promptweave.plugins.door import log_failure
from promptweave.plugins.registry import Registered, Registries
from promptweave.plugins.watchdog import PluginFault, call_plugin, record_fault
from promptweave.routing.group_control import GroupSettings, group_gate, group_settings
from promptweave.routing.group_snapshot import RouteState
from promptweave.routing.low_engagement import low_engagement_exit
from promptweave.routing.memory_policy import memory_policy_for
from promptweave.routing.model import ModelAnswerError, check_model_answer, parse_model_answer
from promptweave.routing.shape import (
    infer_scene,
    resolve_reply_shape,
    resolve_turn_policy,
    rhythm_for,
)
from promptweave.routing.signals import MessageSignals
from promptweave.store.routing_state import GroupSwitch, QuoteCandidate, RoutingState
from promptweave.turn import ChatMessage, Turn

__all__ = ["DEFAULT_DECISION", "Router", "recent_bot_replies"]

log = logging.getLogger("promptweave.routing")

#: What a turn gets when no decide rule matched.
DEFAULT_DECISION = Decision(
    action=TurnAction.REPLY,
    social_action=SocialAction.ANSWER,
    source="default",
    reason="no_rule_matched",
)
#: What a turn gets when its reply-necessity score holds it back.
_BELOW_THRESHOLD = Decision(
    action=TurnAction.PASS,
    social_action=SocialAction.ACK,
    source="necessity",
    reason="necessity_below_threshold",
    stage="necessity",
)
#: Recent bot replies are counted up to this (docs/design.md#reply-necessity: 0–6).
BOT_REPLIES_CAP = 6
#: With no bot message in the group window, the user's last turns with the bot are counted.
HISTORY_FALLBACK = 6

ModelHook = Callable[[RouteContext], str | None]

#: A rule's words (reasons, term names and details, notes) are cut at this length: they go to
#: the trace and the logs, and a rule cannot make those grow without end.
RULE_TEXT_MAX_CHARS = 200
#: The most notes a rule's decision carries.
RULE_NOTES_MAX = 20


#: The words, and whether notes, each kind of answer carries: looked up by exact type, so that
#: the words a record does not have are not asked for (a subclass is asked for all of them).
_ANSWER_WORDS: dict[type, tuple[tuple[str, ...], bool]] = {
    GateSkip: (("reason",), False),
    ScoreTerm: (("name", "detail"), False),
    Decision: (("reason",), True),
}
_ALL_WORDS = (("reason", "name", "detail"), True)


def _bounded(result: Any) -> Any:
    """A rule's result with its words cut at :data:`RULE_TEXT_MAX_CHARS`."""
    if result is None:
        return None
    words, has_notes = _ANSWER_WORDS.get(type(result), _ALL_WORDS)
    changes: dict[str, Any] = {}
    for name in words:
        value = getattr(result, name, None)
        if isinstance(value, str) and len(value) > RULE_TEXT_MAX_CHARS:
            changes[name] = value[:RULE_TEXT_MAX_CHARS]
    notes = getattr(result, "notes", ()) if has_notes else ()
    if notes and (
        len(notes) > RULE_NOTES_MAX or any(len(note) > RULE_TEXT_MAX_CHARS for note in notes)
    ):
        changes["notes"] = tuple(note[:RULE_TEXT_MAX_CHARS] for note in notes[:RULE_NOTES_MAX])
    return attrs.evolve(result, **changes) if changes else result


def recent_bot_replies(turn: Turn, state: RoutingState, config: Config, now: dt.datetime) -> int:
    """The bot's recent presence in the group, 0–6.

    The larger of: the bot's messages among the group's latest ``bot_reply_window`` messages, and
    its replies recorded in the routing state within ``bot_reply_window_s``. When both are 0, its
    answers among the user's last six history turns.
    """
    routing = config.routing
    window = turn.recent_messages[-routing.bot_reply_window :]
    bot_id = turn.bot.id
    count = len([m for m in window if m.sender_id == bot_id and m.text.strip()])
    if turn.group_id is not None:
        since = shifted(now, -routing.bot_reply_window_s)
        count = max(count, state.bot_replies_since(bot_id, turn.group_id, since))
    if count == 0:
        count = sum(1 for entry in turn.history[-HISTORY_FALLBACK:] if entry.role == "assistant")
    return min(BOT_REPLIES_CAP, count)


#: Quote candidates of recent messages, by message object: a group's recent messages are the same
#: objects turn after turn (``promptweave.store.row_memo``), and each is a candidate every turn.
QUOTABLE_MEMO = 1024


def _candidates(
    turn: Turn,
    state: RoutingState,
    config: Config,
    quotable: dict[int, tuple[ChatMessage, QuoteCandidate | None]] | None = None,
) -> tuple[QuoteCandidate, ...]:
    """Record the group's new messages as quote candidates and return them, current marked.

    :param quotable: remembers :meth:`QuoteCandidate.of` of each message object (by id, with the
        message, so a reused id is told apart); a pure function of a frozen record.
    """
    if turn.group_id is None:
        return ()
    bot_id = turn.bot.id
    found = []
    for message in (*turn.recent_messages, turn.message):
        if message.sender_id == bot_id:
            continue
        # A message seen in an earlier turn is found in the memo without a call.
        known = quotable.get(id(message)) if quotable is not None else None
        if known is not None and known[0] is message:
            candidate = known[1]
        else:
            candidate = _quotable(message, quotable)
        if candidate is not None:
            found.append(candidate)
    stored = state.record_candidates(bot_id, turn.group_id, found, config.routing.quote_candidates)
    if stored is None:
        stored = state.candidates(bot_id, turn.group_id)
    # Stored candidates are never current; only the current message's needs a new record, and
    # the rest are handed on as they are.
    ids = [candidate.message_id for candidate in stored]
    current = turn.message.id
    if current not in ids:
        return tuple(stored)
    marked = list(stored)
    # The newest candidate is usually the current one: the scan starts at its first place.
    for index in range(ids.index(current), len(ids)):
        if ids[index] == current:
            marked[index] = attrs.evolve(marked[index], is_current=True)
    return tuple(marked)


def _quotable(
    message: ChatMessage, memo: dict[int, tuple[ChatMessage, QuoteCandidate | None]] | None
) -> QuoteCandidate | None:
    if memo is None:
        return QuoteCandidate.of(message)
    known = memo.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    if len(memo) >= QUOTABLE_MEMO:
        memo.clear()
    candidate = QuoteCandidate.of(message)
    memo[id(message)] = (message, candidate)
    return candidate


#: An hour decisions are counted in: the date and hour of their time as written, and its zone.
_Hour = tuple[dt.date, int, dt.tzinfo | None]
#: Hours of decisions a router keeps per group: more than a day in any zone.
HOURS_KEPT = 50


def _hour_start(hour: _Hour) -> dt.datetime:
    date, number, zone = hour
    return dt.datetime.combine(date, dt.time(number), tzinfo=zone)


def _local_day(now: dt.datetime, timezone: str) -> dt.date:
    """The date of ``now`` in ``timezone`` (its own date at the edge of the calendar)."""
    try:
        zone: dt.tzinfo = zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    try:
        return now.astimezone(zone).date()
    except (OverflowError, ValueError):
        return now.date()


def _trusts_none(plugin: str) -> bool:
    return False


@attrs.frozen
class _Step:
    """One rule of a stage, resolved for calling.

    :param where: how a fault of the rule is placed: ``decision rule 'name'``.
    :param direct: the rule's plugin ships with promptweave, so the watchdog would call it on the
        stage's own thread anyway: it is called without :func:`call_plugin`.
    """

    entry: Registered[DecisionRule]
    evaluate: Callable[[RouteContext], Any]
    where: str
    direct: bool


#: Groups whose settings a router keeps worked out.
GROUPS_KEPT = 4096


@attrs.frozen
class _GroupControl:
    """One group's settings as a router keeps them.

    :param source: the configuration they were worked out from.
    :param switch: the run-time switch they were worked out with.
    :param config: the configuration the group's rules see (its own reply frequency).
    :param notes: what the decision notes of every message of the group.
    """

    source: Config
    switch: GroupSwitch | None
    settings: GroupSettings
    config: Config
    notes: tuple[str, ...]


@attrs.define
class Router:
    """Routes turns with the registered rules and pools.

    :param model_hook: the ``decide_with_model`` hook
        (:meth:`promptweave.plugins.door.Hooks.decide_with_model`), used when ``[routing]
        model_decision`` is on.
    :param learned_replies: ``learned_replies(bot_id, group_id)``: the group's stored short
        replies, for the low-engagement exit.
    :param rhythm_share: ``rhythm_share(bot_id, group_id)``: the group's stored single-bubble
        share, for the reply shape when nothing closer is known.
    :param trusted: whether a plugin, by its registered name, ships with promptweave (the
        runtime's watchdog predicate): its rules are called directly, as the watchdog would call
        them, without going through :func:`promptweave.plugins.watchdog.call_plugin` on every
        message. Any other plugin's rule is still called through it (bounded by the turn's
        deadline, named when it hangs). By default no plugin is.
    """

    registries: Registries
    config: Config
    state: RoutingState
    rng: random.Random
    model_hook: ModelHook | None = None
    learned_replies: Callable[[str, str], Sequence[str]] | None = None
    rhythm_share: Callable[[str, str], float | None] | None = None
    trusted: Callable[[str], bool] = attrs.field(default=_trusts_none, repr=False, eq=False)
    _quotable: dict[int, tuple[ChatMessage, QuoteCandidate | None]] = attrs.field(
        factory=dict, init=False, repr=False, eq=False
    )
    # Each stage's rules resolved once (where a fault is placed, whether the rule is called
    # directly), with the registries they were resolved from (frozen: a stage's rules never
    # change in them): every message runs every gate and necessity rule, and a router given
    # other registries resolves them again.
    _steps: dict[RuleStage, tuple[Registries, tuple[_Step, ...]]] = attrs.field(
        factory=dict, init=False, repr=False, eq=False
    )
    # Each group's settings and the configuration its rules see, with the configuration and
    # switch they were worked out from: every message of a group asks for them.
    _groups: dict[tuple[str, str], _GroupControl] = attrs.field(
        factory=dict, init=False, repr=False, eq=False
    )
    # Each group's decisions of its latest hours, by reason (decisions_today).
    _decisions: dict[tuple[str, str], dict[_Hour, Counter[str]]] = attrs.field(
        factory=dict, init=False, repr=False, eq=False
    )

    def _learned_replies(self, turn: Turn) -> Callable[[], Sequence[str]]:
        group_id, source = turn.group_id, self.learned_replies
        if group_id is None or source is None:
            return tuple
        return functools.partial(source, turn.bot.id, group_id)

    def route(self, turn: Turn, now: dt.datetime) -> Decision:
        """Decide what to do with ``turn``'s message at ``now``.

        The rules see the routing state through a :class:`promptweave.routing.group_snapshot.RouteState`:
        the routed group's small values are read once for the whole route.
        """
        state = RouteState(store=self.state, bot_id=turn.bot.id, group_id=turn.group_id)
        candidates = _candidates(turn, state, self.config, self._quotable)
        # The first read of the group's snapshot (with the reply count); group control then
        # finds the switch in it.
        recent = recent_bot_replies(turn, state, self.config, now)
        control = self._group_control(turn, state)
        config = self.config if control is None else control.config
        context = RouteContext(
            turn=turn,
            now=now,
            config=config,
            signals=MessageSignals.read(
                turn, config=config.routing, candidates=candidates, now=now, state=self.state
            ),
            state=state,
            candidates=candidates,
            recent_bot_replies=recent,
            rng=self.rng,
            learned_replies=self._learned_replies(turn),
        )
        notes: list[str] = []
        necessity = None
        decision = None
        if control is not None:
            notes.extend(control.notes)
            decision = group_gate(control.settings, now, addressed=context.signals.addressed)
        if decision is None:
            decision = self._gate(context, notes)
        if decision is None:
            necessity = self._necessity(context, notes)
            if necessity.proceeds:
                context = attrs.evolve(context, necessity=necessity)
                decision = self._decide(context, notes)
            else:
                decision = _BELOW_THRESHOLD
        if turn.group_id is not None:
            self._count(turn.bot.id, turn.group_id, now, decision.reason)
        return self._complete(decision, context, notes, necessity)

    # -- what was decided today ------------------------------------------------------------

    def _count(self, bot_id: str, group_id: str, now: dt.datetime, reason: str) -> None:
        # By the hour of the time as written: no time-zone conversion on the route (a
        # microsecond each); decisions_today converts the few hours it sums.
        hours = self._decisions.get((bot_id, group_id))
        if hours is None:
            if len(self._decisions) >= GROUPS_KEPT:
                self._decisions.clear()
            hours = self._decisions[(bot_id, group_id)] = {}
        hour = (now.date(), now.hour, now.tzinfo)
        reasons = hours.get(hour)
        if reasons is None:
            if len(hours) >= HOURS_KEPT:
                for oldest in sorted(hours, key=_hour_start)[: len(hours) - HOURS_KEPT + 1]:
                    del hours[oldest]
            reasons = hours[hour] = Counter()
        reasons[reason] += 1

    def decisions_today(
        self, bot_id: str, group_id: str, now: dt.datetime, timezone: str
    ) -> dict[str, int]:
        """The decisions this router made in the group on ``now``'s day in ``timezone`` (the
        bot's), by reason, most frequent first: counted in this process since the router was
        built (``docs/groups.md``, the status command)."""
        day = _local_day(now, timezone)
        total: Counter[str] = Counter()
        for hour, reasons in self._decisions.get((bot_id, group_id), {}).items():
            if _local_day(_hour_start(hour), timezone) == day:
                total.update(reasons)
        return dict(total.most_common())

    # -- group control ---------------------------------------------------------------------

    def _group_control(self, turn: Turn, state: RoutingState) -> _GroupControl | None:
        """The group's settings, when it has any beyond ``[routing]`` or a run-time switch
        (``docs/groups.md``); ``None`` for a private chat and a group with neither."""
        group_id = turn.group_id
        if group_id is None:
            return None
        bot_id, config = turn.bot.id, self.config
        switch = state.mute(bot_id, group_id).switch
        bot = config.bots.get(bot_id)
        if switch is None and (
            bot is None or not (bot.groups or bot.allow_groups or bot.deny_groups)
        ):
            return None
        key = (bot_id, group_id)
        known = self._groups.get(key)
        if known is not None and known.source is config and known.switch == switch:
            return known
        settings = group_settings(config, bot_id, group_id, switch=switch)
        notes = tuple(f"group control: {problem}" for problem in settings.problems)
        if switch is not None and switch.enabled and not settings.configured:
            notes = (
                *notes,
                f"group control: {settings.configured_reason} in the configuration, but the "
                f"bot was switched on{' by ' + switch.by if switch.by else ''}",
            )
        routed = config
        if settings.tuned:
            routed = attrs.evolve(
                config,
                routing=attrs.evolve(
                    config.routing,
                    necessity_threshold=settings.necessity_threshold,
                    low_engagement=settings.low_engagement,
                    low_engagement_probabilities=settings.low_engagement_probabilities,
                ),
            )
        if len(self._groups) >= GROUPS_KEPT:
            self._groups.clear()
        control = self._groups[key] = _GroupControl(
            source=config, switch=switch, settings=settings, config=routed, notes=notes
        )
        return control

    # -- stages ----------------------------------------------------------------------------

    def _stage(self, stage: RuleStage) -> tuple[_Step, ...]:
        registries = self.registries
        known = self._steps.get(stage)
        if known is not None and known[0] is registries:
            return known[1]
        steps = tuple(
            _Step(
                entry=entry,
                evaluate=entry.item.evaluate,
                where=f"decision rule {entry.item.name!r}",
                direct=self.trusted(entry.plugin),
            )
            for entry in registries.rules_for(stage)
        )
        self._steps[stage] = (registries, steps)
        return steps

    def _answers(
        self, stage: RuleStage, context: RouteContext, expected: type, notes: list[str]
    ) -> Iterator[Any]:
        """Each answer of the stage's rules that is not ``None``, in order, its words bounded; a
        rule that raises or answers the wrong type is noted and skipped. The stage stops asking
        when it stops iterating (the first gate or decide rule that answers)."""
        for step in self._stage(stage):
            try:
                if step.direct:
                    result = step.evaluate(context)
                else:
                    result = call_plugin(step.entry.plugin, step.where, step.evaluate, context)
            except Exception as exc:
                name, plugin = step.entry.item.name, step.entry.plugin
                log_failure(log, exc, "decision rule %r of plugin %r raised", name, plugin)
                notes.append(f"rule {name!r} ({plugin}) raised {type(exc).__name__}: {exc}")
                continue
            if result is None:
                continue
            if not isinstance(result, expected):
                name, plugin = step.entry.item.name, step.entry.plugin
                notes.append(
                    f"rule {name!r} ({plugin}) returned {type(result).__name__}, "
                    f"expected {expected.__name__} or None; ignored"
                )
                record_fault(
                    PluginFault(
                        plugin=plugin,
                        where=step.where,
                        kind="wrong_type",
                        detail=f"returned {type(result).__name__}, expected "
                        f"{expected.__name__} or None",
                    )
                )
                continue
            yield _bounded(result)

    def _gate(self, context: RouteContext, notes: list[str]) -> Decision | None:
        skip: GateSkip
        for skip in self._answers(RuleStage.GATE, context, GateSkip, notes):
            turn, group_id = context.turn, context.group_id
            silence_until = None
            if group_id is not None and skip.silence_s:
                silence_until = shifted(context.now, skip.silence_s)
                context.state.start_silence(turn.bot.id, group_id, silence_until)
            if group_id is not None and skip.keep_message:
                context.state.keep_message(
                    turn.bot.id, group_id, turn.message, context.config.routing.kept_messages_max
                )
            return Decision(
                action=TurnAction.PASS,
                social_action=SocialAction.ACK,
                source="gate",
                reason=skip.reason,
                stage="gate",
                silence_until=silence_until,
            )
        return None

    def _necessity(self, context: RouteContext, notes: list[str]) -> NecessityScore:
        terms: list[ScoreTerm] = list(self._answers(RuleStage.NECESSITY, context, ScoreTerm, notes))
        signals, hints = context.signals, context.turn.route_hints
        bypassed = None
        if signals.addressed:
            bypassed = "addressed"
        elif signals.follow_up_call:
            bypassed = "follow_up"
        elif hints.tool_intent and hints.tools_permitted:
            bypassed = "required_tool_intent"
        return NecessityScore(
            score=sum(term.points for term in terms),
            threshold=context.config.routing.necessity_threshold,
            terms=tuple(terms),
            bypassed=bypassed,
        )

    def _rules(self, context: RouteContext, notes: list[str]) -> Decision:
        decision: Decision
        for decision in self._answers(RuleStage.DECIDE, context, Decision, notes):
            return decision
        return DEFAULT_DECISION

    def _decide(self, context: RouteContext, notes: list[str]) -> Decision:
        if not context.config.routing.model_decision or self.model_hook is None:
            return self._rules(context, notes)
        hints = context.turn.route_hints
        if hints.tool_intent and hints.tools_permitted:
            # A required tool needs no model to decide (docs/design.md#decide-rules: TOOL needs only
            # permission).
            return Decision(action=TurnAction.TOOL, reason="required_tool_intent")
        try:
            raw = self._ask_model(context)
        except Exception as exc:
            log_failure(log, exc, "decide_with_model raised")
            notes.append(f"decide_with_model raised {type(exc).__name__}: {exc}")
            return self._fallback(context, notes, "model_request_failed")
        if raw is None:
            notes.append("no plugin answered decide_with_model; the rules decided")
            return self._rules(context, notes)
        try:
            answer = parse_model_answer(raw)
        except ModelAnswerError as exc:
            notes.append(str(exc))
            return self._fallback(context, notes, "invalid_model_response")
        return check_model_answer(answer, context)

    def _ask_model(self, context: RouteContext) -> Any:
        """The first answer of a ``decide_with_model`` implementation, each called on its own so
        that a hang or an error names its plugin."""
        hook = self.model_hook
        if hook is None:
            return None
        return hook(context)

    def _fallback(self, context: RouteContext, notes: list[str], reason: str) -> Decision:
        ruled = self._rules(context, notes)
        notes.append(f"fallback to the rules, which decided {ruled.reason!r}")
        return attrs.evolve(ruled, source="fallback", reason=reason)

    # -- completion ------------------------------------------------------------------------

    def _complete(
        self,
        decision: Decision,
        context: RouteContext,
        notes: list[str],
        necessity: NecessityScore | None = None,
    ) -> Decision:
        """The decision with what follows from it: the low-engagement exit, the kept messages,
        the turn policy, the reply shape, the memory policy, the notes, and the turn's necessity
        score when it got that far (one copy of the decision, not one per step)."""
        turn, signals, routing = context.turn, context.signals, context.config.routing
        low_engagement = None
        if decision.action is TurnAction.PASS and routing.low_engagement:
            trigger = self._low_engagement_trigger(decision, signals)
            if trigger is not None:
                if necessity is not None and context.necessity is None:
                    # The pools see the score as the decide rules would have: a turn held back
                    # by it got this far without copying the context for it.
                    context = attrs.evolve(context, necessity=necessity)
                pools = tuple(self.registries.pools.values())
                low_engagement = low_engagement_exit(context, trigger, pools, notes)
        kept: tuple[ChatMessage, ...] = ()
        if decision.speaks and turn.group_id is not None:
            kept = context.state.take_kept_messages(turn.bot.id, turn.group_id)
        scene = turn.route_hints.scene or infer_scene(decision, signals, routing)
        policy = resolve_turn_policy(decision, signals, scene)
        # Only a casual reply's shape follows the group's rhythm: a serious or tool turn's shape
        # is fixed, and its rhythm is not read (a store read on a bot with stored baselines).
        casual = not policy.needs_tool and policy.seriousness == "casual"
        rhythm = rhythm_for(turn, context.state, self.rhythm_share) if casual else None
        shape = resolve_reply_shape(policy, rhythm, context.rng)
        return attrs.evolve(
            decision,
            necessity=decision.necessity if necessity is None else necessity,
            memory_policy=memory_policy_for(decision, signals, turn),
            low_engagement=low_engagement,
            turn_policy=policy,
            reply_shape=shape,
            kept_messages=kept,
            notes=(*decision.notes, *notes),
        )

    @staticmethod
    def _low_engagement_trigger(decision: Decision, signals: MessageSignals) -> str | None:
        """Which exit applies: a rule PASS not addressed to the bot, or a necessity skip of a
        high-frequency short reaction (never noise, spam, an incomplete or bystander message)."""
        if signals.addressed:
            return None
        if decision.stage == "decide" and decision.source == "rule":
            return "rule_pass"
        if (
            decision.stage == "necessity"
            and signals.short_reaction
            and not (signals.noise or signals.spam or signals.incomplete or signals.bystander)
        ):
            return "necessity_short_reaction"
        return None
