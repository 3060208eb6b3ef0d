"""Built-in plugin ``learners``: what the bot learns of its groups without a model
(``docs/learning.md``).

Five learners, each incremental: it reads the group-log messages after its cursor, keeps what it
needs of earlier batches (the previous message, the last bot message, an open turn) in its small
state, and writes :class:`promptweave.store.learned.LearnedItem` records:

- ``expression_pairs`` (kind ``expression_pair``): how members answer each other, a trigger and
  a reply, either quoted (a member replies to another member's message) or adjacent (answered
  within ``adjacent_window_s`` with nothing between). Only clean human lines.
- ``rhythm`` (kind ``rhythm``, one item per group): the share of turns that are one bubble and
  the median bubble length.
- ``pickups`` (kind ``pickup``): how a member took up what the bot said (quoted it, or spoke
  right after it), with the situation the bot answered.
- ``teachings`` (kind ``teaching``): what a member told the bot to remember (「记住…」「我叫X」…);
  a later teaching of the same subject replaces the earlier one.
- ``negative_feedback`` (kind ``feedback``): a member rejecting a bot reply (「不可以」…): the
  reply's injected sources are scored and, of its ambient sources, the phrases it shared are
  blacklisted in the feedback ledger (``stores.feedback``) until the outcome is forgotten.

Messages of the bot's own and peer accounts (``LearnerBatch.bot_ids``) are never learned as a
member's; a pick-up and a rejection react to the bot's own messages (``LearnerBatch.bot_id``).
Every item is learned at ``LearnerBatch.now``, so a replay learns exactly the same. Settings come
from ``[learning.learners.NAME]``; each has the default of the module constant named with it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from promptweave import hookimpl
from promptweave.builtin_plugins.learning_rules import (
    NEGATIVE_WORDS,
    OFFENSIVE_WORDS,
    PREVIEW_CHARS,
    TEACHING_PATTERNS,
    blacklist_phrases,
    clean_text,
    compile_patterns,
    expression_line,
    lower_median,
    named_first,
    negative_hits,
    score_entries,
    teaching_fact,
    teaching_subject,
)
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import LearnedItem, item_key
from promptweave.text.routing_words import is_shut_up, mentioned_names
from promptweave.turn import ChatMessage

__all__ = [
    "ADJACENT_WINDOW_S",
    "BOTS_KEPT",
    "EXPRESSION_CAP",
    "EXPRESSION_MAX_CHARS",
    "FEEDBACK_CAP",
    "FEEDBACK_REACTION_WINDOW_S",
    "FEEDBACK_SCORES",
    "LENGTH_CAP",
    "MIN_TURNS",
    "OUTCOME_MAX_PHRASES",
    "PICKUP_CAP",
    "PICKUP_REACTION_WINDOW_S",
    "SCORED_PER_TYPE",
    "TEACHING_CAP",
    "TURN_WINDOW_S",
    "learn_expression_pairs",
    "learn_negative_feedback",
    "learn_pickups",
    "learn_rhythm",
    "learn_teachings",
    "record_outcomes",
    "undo_outcomes",
]

#: ``expression_pairs.adjacent_window_s``: the longest wait, in seconds, of an adjacent answer;
#: a member's line this soon after a bot message answers the bot and is no expression.
ADJACENT_WINDOW_S = 60.0
#: ``expression_pairs.max_chars``: the longest line of a pair (after cleaning).
EXPRESSION_MAX_CHARS = 40
#: The most expression pairs kept per group.
EXPRESSION_CAP = 500
#: ``rhythm.turn_window_s``: a member's next message within this many seconds (nobody else
#: between) continues the same turn.
TURN_WINDOW_S = 20.0
#: ``rhythm.min_turns``: the rhythm is written once this many turns were counted.
MIN_TURNS = 20
#: Message lengths above this count as this in the rhythm's length histogram (it stays small).
LENGTH_CAP = 200
#: ``pickups.reaction_window_s``: a member's message this soon after the bot's, with nothing
#: between, takes it up.
PICKUP_REACTION_WINDOW_S = 60.0
#: The most pick-ups kept per group.
PICKUP_CAP = 200
#: The most teachings kept per group.
TEACHING_CAP = 200
#: ``negative_feedback.reaction_window_s``: an addressed rejection this soon after the bot's
#: message (no other member between) rejects it.
FEEDBACK_REACTION_WINDOW_S = 120.0
#: ``negative_feedback.scores``: the score each injected source of a rejected reply gets, by
#: source type (a type not listed scores 0).
FEEDBACK_SCORES: Mapping[str, float] = {
    "ambient": -1.0,
    "expression": -3.0,
    "strategy": -2.0,
    "memory": -1.0,
    "knowledge": 0.0,
    "self_alias": 0.0,
    "section": 0.0,
}
#: The most phrases one rejection blacklists.
OUTCOME_MAX_PHRASES = 32
#: The most scored sources of one type one rejection keeps.
SCORED_PER_TYPE = 64
#: The most negative outcomes kept per group.
FEEDBACK_CAP = 200
#: The bot's recent messages a learner keeps in its state, to find the one a member quotes.
BOTS_KEPT = 16


# -- settings --------------------------------------------------------------------------------


def _key(batch: LearnerBatch, key: str) -> str:
    return f"learning.learners.{batch.learner}.{key}"


def _number(batch: LearnerBatch, key: str, default: float, *, minimum: float = 0.0) -> float:
    value = batch.settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ValueError(
            f"{_key(batch, key)} must be a number of at least {minimum:g}, not {value!r}"
        )
    return float(value)


def _integer(batch: LearnerBatch, key: str, default: int, *, minimum: int = 0) -> int:
    value = batch.settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"{_key(batch, key)} must be an integer of at least {minimum}, not {value!r}"
        )
    return value


def _words(batch: LearnerBatch, key: str, default: Sequence[str]) -> tuple[str, ...]:
    value = batch.settings.get(key, default)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{_key(batch, key)} must be a list of strings, not {value!r}")
    if not all(isinstance(word, str) for word in value):
        raise ValueError(f"{_key(batch, key)} must be a list of strings, not {list(value)!r}")
    return tuple(word for word in value if word.strip())


def _scores(batch: LearnerBatch) -> dict[str, float]:
    value = batch.settings.get("scores", {})
    if not isinstance(value, Mapping):
        raise ValueError(f"{_key(batch, 'scores')} must be a table of source type = number")
    scores = dict(FEEDBACK_SCORES)
    for kind, delta in value.items():
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise ValueError(f"{_key(batch, 'scores')}.{kind} must be a number, not {delta!r}")
        scores[str(kind)] = float(delta)
    return scores


# -- shared helpers --------------------------------------------------------------------------


def _ts(message: ChatMessage) -> float:
    return message.time.timestamp()


def _within(later: float, earlier: float, window: float) -> bool:
    return 0.0 <= later - earlier <= window


def _item(
    batch: LearnerBatch,
    kind: str,
    key: str,
    fields: Mapping[str, Any],
    *,
    user_id: str = "",
    ids: Sequence[str] = (),
) -> LearnedItem:
    now = batch.now
    if not isinstance(now, dt.datetime):
        raise TypeError(f"batch.now is {type(now).__name__}, not a datetime")
    return LearnedItem(
        kind=kind,
        bot_id=batch.bot_id,
        group_id=batch.group_id,
        key=key,
        fields=fields,
        user_id=user_id,
        source_message_ids=tuple(ids),
        learner=batch.learner,
        learned_at=now,
    )


def _result(
    items: Sequence[LearnedItem] = (),
    *,
    state: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> LearnerResult:
    # LearnerResult.items is converted by ``tuple``, which mypy types as a generic Iterable.
    kept: Any = tuple(items)
    return LearnerResult(items=kept, state=state, notes=tuple(notes))


def _find(batch: LearnerBatch, message_id: str) -> ChatMessage | None:
    log = getattr(batch.stores, "group_log", None)
    if log is None:
        return None
    found = log.find_group_message(batch.bot_id, batch.group_id, message_id)
    return found if isinstance(found, ChatMessage) else None


def _skipped(counts: Counter[str], what: str) -> tuple[str, ...]:
    if not counts:
        return ()
    detail = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))
    return (f"{sum(counts.values())} {what} skipped: {detail}",)


def _remember_bot(
    bots: list[dict[str, Any]], entry: dict[str, Any], keep: int = BOTS_KEPT
) -> list[dict[str, Any]]:
    return [*(b for b in bots if b.get("id") != entry["id"]), entry][-keep:]


# -- expression pairs ------------------------------------------------------------------------


def _addresses_bot(batch: LearnerBatch, message: ChatMessage) -> bool:
    """Addressed to a bot, @-mentioning one, or quoting one's message."""
    if message.addressed or any(m in batch.bot_ids for m in message.mentions):
        return True
    if message.reply_to is None:
        return False
    quoted = _find(batch, message.reply_to)
    return quoted is not None and quoted.sender_id in batch.bot_ids


def learn_expression_pairs(batch: LearnerBatch) -> LearnerResult:
    """Pairs of clean human lines: a member quoting another member (``how = "quote"``), or a
    member answered by another within ``adjacent_window_s`` with no message between
    (``"adjacent"``). A line addressed to, quoting or just after a bot's message is the bot's
    business (a pick-up), never an expression."""
    if not batch.group_id:
        return LearnerResult()
    window = _number(batch, "adjacent_window_s", ADJACENT_WINDOW_S)
    max_chars = _integer(batch, "max_chars", EXPRESSION_MAX_CHARS, minimum=2)
    offensive = _words(batch, "offensive_words", OFFENSIVE_WORDS)
    previous: Mapping[str, Any] | None = batch.state.get("previous")
    items: list[LearnedItem] = []
    skipped: Counter[str] = Counter()

    def line_of(message: ChatMessage) -> tuple[str, str]:
        return expression_line(
            message.text,
            has_images=bool(message.images),
            max_chars=max_chars,
            offensive_words=offensive,
        )

    def pair(trigger: str, reply: str, how: str, ids: tuple[str, str]) -> None:
        if trigger == reply:
            skipped["same"] += 1
            return
        fields = {"trigger": trigger, "reply": reply, "how": how}
        items.append(_item(batch, "expression_pair", item_key(trigger, reply), fields, ids=ids))

    for logged in batch.messages:
        message: ChatMessage = logged.message
        ts = _ts(message)
        human = message.sender_id not in batch.bot_ids
        line, reason = line_of(message) if human else ("", "")
        to_bot = human and (
            _addresses_bot(batch, message)
            or (
                previous is not None
                and not previous["human"]
                and _within(ts, previous["ts"], window)
            )
        )
        if reason:
            skipped[reason] += 1
        elif human and to_bot:
            skipped["to_bot"] += 1
        elif human and message.id is not None:
            if message.reply_to is not None:
                quoted = _find(batch, message.reply_to)
                if (
                    quoted is not None
                    and quoted.id is not None
                    and quoted.sender_id not in batch.bot_ids
                    and quoted.sender_id != message.sender_id
                ):
                    quoted_line, _ = line_of(quoted)
                    quoted_to_bot = (
                        bool(previous["to_bot"])
                        if previous is not None and previous["id"] == quoted.id
                        else _addresses_bot(batch, quoted)
                    )
                    if quoted_line and not quoted_to_bot:
                        pair(quoted_line, line, "quote", (quoted.id, message.id))
            elif (
                previous is not None
                and previous["human"]
                and previous["line"]
                and not previous["to_bot"]
                and previous["id"] is not None
                and previous["sender"] != message.sender_id
                and _within(ts, previous["ts"], window)
            ):
                pair(previous["line"], line, "adjacent", (previous["id"], message.id))
        previous = {
            "id": message.id,
            "sender": message.sender_id,
            "ts": ts,
            "line": line,
            "human": human,
            "to_bot": to_bot,
        }
    return _result(items, state={"previous": previous}, notes=_skipped(skipped, "lines"))


# -- rhythm ----------------------------------------------------------------------------------


def learn_rhythm(batch: LearnerBatch) -> LearnerResult:
    """Count the group's turns (a member's consecutive messages, nobody between, each within
    ``turn_window_s`` of the last) and their bubbles' lengths; once ``min_turns`` turns are
    counted, write the ``rhythm`` item: the share of one-bubble turns and the (lower) median
    length of a member's message, recomputed from the state every run. A turn still open at the
    end of a batch is carried over; it counts once a message closes it."""
    if not batch.group_id:
        return LearnerResult()
    window = _number(batch, "turn_window_s", TURN_WINDOW_S)
    min_turns = _integer(batch, "min_turns", MIN_TURNS, minimum=1)
    state = batch.state
    open_turn: dict[str, Any] | None = dict(state["open"]) if state.get("open") else None
    turns = int(state.get("turns", 0))
    single = int(state.get("single", 0))
    lengths: dict[str, int] = {str(k): int(v) for k, v in dict(state.get("lengths", {})).items()}
    for logged in batch.messages:
        message: ChatMessage = logged.message
        ts = _ts(message)
        human = message.sender_id not in batch.bot_ids
        if open_turn is not None and (
            not human
            or message.sender_id != open_turn["sender"]
            or not _within(ts, open_turn["ts"], window)
        ):
            turns += 1
            single += open_turn["n"] == 1
            open_turn = None
        if not human:
            continue
        length = len(clean_text(message.text))
        if length:
            slot = str(min(length, LENGTH_CAP))
            lengths[slot] = lengths.get(slot, 0) + 1
        if open_turn is None:
            open_turn = {"sender": message.sender_id, "ts": ts, "n": 1}
        else:
            open_turn = {**open_turn, "ts": ts, "n": open_turn["n"] + 1}
    new_state = {"open": open_turn, "turns": turns, "single": single, "lengths": lengths}
    if turns < min_turns:
        return LearnerResult(state=new_state, notes=(f"{turns} of {min_turns} turns counted",))
    fields = {
        "single_bubble_share": round(single / turns, 4),
        "median_segment_chars": lower_median(lengths),
        "turns": turns,
        "segments": sum(lengths.values()),
    }
    return _result((_item(batch, "rhythm", "rhythm", fields),), state=new_state)


# -- pick-ups --------------------------------------------------------------------------------


def _bot_entry(message: ChatMessage, situation: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        "id": message.id,
        "ts": _ts(message),
        "text": clean_text(message.text)[:PREVIEW_CHARS],
        "situation_id": situation["id"] if situation else None,
        "situation": situation["text"] if situation else "",
    }


def _quoted_bot(
    batch: LearnerBatch, bots: Sequence[Mapping[str, Any]], message_id: str
) -> Mapping[str, Any] | None:
    """The bot's own message ``message_id``: from the learner's state, else from the group log
    (its situation then unknown)."""
    for entry in bots:
        if entry["id"] == message_id:
            return entry
    found = _find(batch, message_id)
    if found is None or found.sender_id != batch.bot_id:
        return None
    return _bot_entry(found, None)


def learn_pickups(batch: LearnerBatch) -> LearnerResult:
    """A member taking up what the bot said: quoting its message (``how = "quote"``), or the
    very next message after it within ``reaction_window_s``, addressed or not (``"adjacent"``).
    The item keeps the member's last line before the bot's (the situation), the bot's line and
    the reaction."""
    if not batch.group_id:
        return LearnerResult()
    window = _number(batch, "reaction_window_s", PICKUP_REACTION_WINDOW_S)
    state = batch.state
    bots: list[dict[str, Any]] = [dict(b) for b in state.get("bots", ())]
    last_human: Mapping[str, Any] | None = state.get("last_human")
    previous_bot: Mapping[str, Any] | None = state.get("previous_bot")
    items: list[LearnedItem] = []
    for logged in batch.messages:
        message: ChatMessage = logged.message
        if message.sender_id == batch.bot_id:
            if message.id is None:
                previous_bot = None
                continue
            entry = _bot_entry(message, last_human)
            bots = _remember_bot(bots, entry)
            previous_bot = entry
            continue
        if message.sender_id in batch.bot_ids:
            previous_bot = None
            continue
        target: Mapping[str, Any] | None = None
        how = ""
        if message.reply_to is not None:
            target, how = _quoted_bot(batch, bots, message.reply_to), "quote"
        elif previous_bot is not None and _within(_ts(message), previous_bot["ts"], window):
            target, how = previous_bot, "adjacent"
        reaction = clean_text(message.text)[:PREVIEW_CHARS]
        if target is not None and target["text"] and reaction and message.id is not None:
            situation_id = target["situation_id"]
            fields = {
                "situation": target["situation"],
                "bot_reply": target["text"],
                "reaction": reaction,
                "how": how,
            }
            ids = (*([situation_id] if situation_id else []), target["id"], message.id)
            items.append(
                _item(
                    batch,
                    "pickup",
                    item_key(target["id"], message.id),
                    fields,
                    user_id=message.sender_id,
                    ids=ids,
                )
            )
        text = clean_text(message.text)[:PREVIEW_CHARS]
        if text and message.id is not None:
            last_human = {"id": message.id, "text": text}
        previous_bot = None
    return _result(
        items,
        state={"bots": bots, "last_human": last_human, "previous_bot": previous_bot},
    )


# -- teachings -------------------------------------------------------------------------------


def _bot_names(batch: LearnerBatch) -> tuple[str, ...]:
    if batch.bot_names:
        return batch.bot_names
    bots = getattr(batch.config, "bots", None) or {}
    bot = bots.get(batch.bot_id)
    if bot is None:
        return ()
    return tuple(name for name in (bot.name, *bot.aliases) if name)


def learn_teachings(batch: LearnerBatch) -> LearnerResult:
    """What a member tells the bot to remember: an addressed human message matching one of
    ``patterns`` (「记住…」「记得…」「记一下…」「以后…」「我叫X不叫Y」「我叫X」「叫我X」), with
    the bot's name stripped from its start (a message starting with the bot's name is addressed
    to it, as one that @-mentions it); not a question, a shut-up request or a line that
    @-mentions someone else. One item per subject (``name:<member>`` for a name, else the fact's
    head), so a later teaching of it replaces the earlier one."""
    if not batch.group_id:
        return LearnerResult()
    raw_patterns = _words(batch, "patterns", TEACHING_PATTERNS)
    try:
        patterns = compile_patterns(raw_patterns)
    except Exception as exc:  # re.error: a bad pattern in the configuration
        raise ValueError(f"{_key(batch, 'patterns')} holds a bad pattern: {exc}") from None
    names = _bot_names(batch)
    items: list[LearnedItem] = []
    skipped: Counter[str] = Counter()
    for logged in batch.messages:
        message: ChatMessage = logged.message
        if message.sender_id in batch.bot_ids or message.id is None:
            continue
        if not (message.addressed or named_first(message.text, names)):
            continue
        others = [m for m in message.mentions if m and m != batch.bot_id]
        written = [n for n in mentioned_names(message.text) if n not in names]
        if others or written:
            skipped["bystander"] += 1
            continue
        fact = teaching_fact(message.text, names, patterns)
        if not fact:
            continue
        subject = teaching_subject(fact, message.sender_id)
        teacher = message.sender_name or message.sender_id
        fields = {
            "text": f"{teacher}说：{fact}"[:PREVIEW_CHARS],
            "subject": subject,
            "teacher_name": message.sender_name,
        }
        items.append(
            _item(
                batch,
                "teaching",
                item_key(subject),
                fields,
                user_id=message.sender_id,
                ids=(message.id,),
            )
        )
    return _result(items, notes=_skipped(skipped, "teachings"))


# -- negative feedback -----------------------------------------------------------------------


def learn_negative_feedback(batch: LearnerBatch) -> LearnerResult:
    """A member rejecting a bot reply: a line quoting the bot's message, or addressed to the bot
    right after it (within ``reaction_window_s``, no other member between), that contains one of
    ``negative_words`` (a shut-up request alone counts only when it quotes). The outcome scores
    every source injected into the reply (``scores``) and blacklists, of its ambient sources,
    the risk words (``negative_words`` and ``offensive_words``) they share with the reply and
    their longest shared phrase. One outcome per bot message: another member's rejection of it
    counts it again, its content unchanged."""
    if not batch.group_id:
        return LearnerResult()
    window = _number(batch, "reaction_window_s", FEEDBACK_REACTION_WINDOW_S)
    negative = _words(batch, "negative_words", NEGATIVE_WORDS)
    offensive = _words(batch, "offensive_words", OFFENSIVE_WORDS)
    scores = _scores(batch)
    risk_words = tuple(dict.fromkeys((*negative, *offensive)))
    state = batch.state
    bots: list[dict[str, Any]] = [dict(b) for b in state.get("bots", ())]
    previous_bot: Mapping[str, Any] | None = state.get("previous_bot")
    learned = getattr(batch.stores, "learned", None)
    outcomes: dict[str, LearnedItem] = {}
    items: list[LearnedItem] = []
    notes: list[str] = []
    for logged in batch.messages:
        message: ChatMessage = logged.message
        if message.sender_id == batch.bot_id:
            if message.id is None:
                continue
            entry = {
                "id": message.id,
                "ts": _ts(message),
                "text": clean_text(message.text)[:PREVIEW_CHARS],
            }
            bots = _remember_bot(bots, entry)
            previous_bot = entry
            continue
        if message.sender_id in batch.bot_ids:
            continue  # a peer bot's line is no member between the reply and its rejection
        target: Mapping[str, Any] | None = None
        quoting = message.reply_to is not None
        if message.reply_to is not None:
            target = next((b for b in bots if b["id"] == message.reply_to), None)
            if target is None:
                found = _find(batch, message.reply_to)
                if found is not None and found.sender_id == batch.bot_id and found.id:
                    target = {"id": found.id, "text": clean_text(found.text)[:PREVIEW_CHARS]}
        elif (
            previous_bot is not None
            and message.addressed
            and _within(_ts(message), previous_bot["ts"], window)
        ):
            target = previous_bot
        previous_bot = None
        if target is None or message.id is None:
            continue
        hits, only_shut_up = negative_hits(message.text, negative)
        rejects = (
            bool(hits) or is_shut_up(message.text) if quoting else bool(hits) and not only_shut_up
        )
        if not rejects:
            continue
        outcome_id = str(target["id"])
        key = item_key(outcome_id)
        first = outcomes.get(key)
        if first is None and learned is not None:
            first = learned.item(batch.bot_id, batch.group_id, "feedback", key)
        if first is not None:
            fields: Mapping[str, Any] = first.fields
            user_id = first.user_id
        else:
            injection = (
                learned.injection(batch.bot_id, batch.group_id, outcome_id)
                if learned is not None
                else None
            )
            if injection is None:
                notes.append(f"no injection kept for message {outcome_id}: nothing scored")
                sources: Sequence[Mapping[str, Any]] = ()
                reply = target["text"]
            else:
                sources = injection.sources
                reply = target["text"] or clean_text(injection.text)[:PREVIEW_CHARS]
            fields = {
                "outcome_id": outcome_id,
                "reply": reply,
                "reaction": clean_text(message.text)[:PREVIEW_CHARS],
                "scores": score_entries(sources, scores, per_type=SCORED_PER_TYPE),
                "phrases": blacklist_phrases(reply, sources, risk_words, limit=OUTCOME_MAX_PHRASES),
            }
            user_id = message.sender_id
        item = _item(batch, "feedback", key, fields, user_id=user_id, ids=(outcome_id, message.id))
        outcomes[key] = item
        items.append(item)
    return _result(items, state={"bots": bots, "previous_bot": previous_bot}, notes=notes)


def record_outcomes(items: Sequence[LearnedItem], stores: Any) -> None:
    """``Learner.stored`` of ``negative_feedback``: blacklist each stored outcome's phrases in
    the feedback ledger (idempotent per outcome)."""
    ledger = getattr(stores, "feedback", None)
    if ledger is None:
        return
    for item in items:
        ledger.record_outcome(
            item.bot_id,
            item.group_id,
            str(item.fields["outcome_id"]),
            list(item.fields.get("phrases", ())),
            now=item.learned_at,
        )


def undo_outcomes(items: Sequence[LearnedItem], stores: Any) -> None:
    """``Learner.forgotten`` of ``negative_feedback``: take the forgotten outcomes' phrases out
    of the feedback ledger."""
    ledger = getattr(stores, "feedback", None)
    if ledger is None:
        return
    for item in items:
        ledger.undo_outcome(item.bot_id, item.group_id, str(item.fields["outcome_id"]))


# -- registration ----------------------------------------------------------------------------

LEARNERS: tuple[Learner, ...] = (
    Learner(
        name="expression_pairs",
        writes=("expression_pair",),
        run=learn_expression_pairs,
        min_batch=20,
        interval_s=300.0,
        caps={"expression_pair": EXPRESSION_CAP},
        description="how members answer each other: quoted and adjacent pairs of clean lines",
    ),
    Learner(
        name="rhythm",
        writes=("rhythm",),
        run=learn_rhythm,
        min_batch=20,
        interval_s=300.0,
        caps={"rhythm": 1},
        description="the group's rhythm: share of one-bubble turns, median message length",
    ),
    Learner(
        name="pickups",
        writes=("pickup",),
        run=learn_pickups,
        min_batch=10,
        interval_s=60.0,
        caps={"pickup": PICKUP_CAP},
        description="how members took up what the bot said (quoted it or answered it)",
    ),
    Learner(
        name="teachings",
        writes=("teaching",),
        run=learn_teachings,
        min_batch=1,
        interval_s=5.0,
        caps={"teaching": TEACHING_CAP},
        description="what members told the bot to remember (记住…, 我叫X…)",
    ),
    Learner(
        name="negative_feedback",
        writes=("feedback",),
        run=learn_negative_feedback,
        min_batch=1,
        interval_s=5.0,
        caps={"feedback": FEEDBACK_CAP},
        stored=record_outcomes,
        forgotten=undo_outcomes,
        description="replies members rejected (不可以…): sources scored, phrases blacklisted",
    ),
)


@hookimpl
def register_learners(register: Callable[[Learner], None]) -> None:
    for learner in LEARNERS:
        register(learner)
