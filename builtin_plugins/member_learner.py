"""Built-in plugin ``member_learner``: what the bot learns of each member from its own
conversations with them, by asking the learning model (``docs/learning.md``, person facts and
relationships).

The learner ``members`` reads the group log for *exchanges*: a member's message addressed to the
bot (``ChatMessage.addressed``, an @-mention of it, or a reply to one of its messages), the bot's
delivered reply (the bot message whose kept injection answers it, else the one quoting it, else
the bot's next message within ``window_s``; the reply's further bubbles join it), and the
member's next message within ``window_s`` after the reply (the reaction; it may be absent). An
exchange still open at the end of a batch is kept in the learner's state and finished by the
next run. A peer bot's lines (``LearnerBatch.bot_ids``) are never a member's.

Per member with at least one complete exchange in the run (at most ``max_members`` members, those
with the most exchanges first; their newest ``max_exchanges`` exchanges), the learning model is
asked once (task ``members``, the persona pack's ``[learning_prompts.members]``) for the member's
stable facts, notes on the relationship and the outcome of the exchanges. What it answers is
filtered (privacy, links, offensive words, injection-like text, near-duplicates of known facts)
and stored:

- kind ``person_fact``: one item per fact (``user_id`` the member, fields ``{text}``);
- kind ``relationship``: one item per member (key ``item_key("relationship", user_id)``), fields
  ``{facts, guidance, affinity, exchanges}``: the facts and guidance merged with the old ones
  (newest first, at most :data:`NOTES_KEPT` each), the affinity moved by ``affinity_step`` per
  exchange the answer covers in the direction of its one ``outcome`` (the model gives one outcome
  for the run's exchanges of the member; it is applied to each), clamped to [-1, 1].

Both carry the member's ``user_id``, so ``promptweave learned list --user`` and ``learned forget
--user`` (:meth:`promptweave.learning.stage.LearningStage.forget_member`) cover them.

The offline learning model answers with :func:`offline_members`, a rule over the payload's text
(documented there): a stand-in, not a model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from promptweave import hookimpl
from promptweave._patterns import lazy_pattern
from promptweave.builtin_plugins.learners import (
    _bot_names,
    _find,
    _integer,
    _item,
    _number,
    _result,
    _skipped,
    _ts,
    _within,
    _words,
)
from promptweave.builtin_plugins.learning_rules import (
    NEGATIVE_WORDS,
    OFFENSIVE_WORDS,
    clean_text,
    is_command,
    is_question,
    strip_address,
)
from promptweave.builtin_plugins.model_tasks import default_pack, model_task
from promptweave.learning.model import answer_schema
from promptweave.plugins.contributions import Learner, LearnerBatch, LearnerResult
from promptweave.store.learned import LearnedItem, item_key
from promptweave.text.routing_words import has_url
from promptweave.text.rules import InjectionDetector
from promptweave.turn import ChatMessage

__all__ = [
    "AFFINITY_STEP",
    "DUPLICATE_SIMILARITY",
    "EXCHANGE_WINDOW_S",
    "FACT_CHARS",
    "KNOWN_FACTS_SENT",
    "MAX_EXCHANGES",
    "MAX_FACTS",
    "MAX_MEMBERS",
    "MAX_NOTES",
    "NOTES_KEPT",
    "NOTE_CHARS",
    "PERSON_FACT_CAP",
    "RELATIONSHIP_CAP",
    "MembersAnswer",
    "RelationshipAnswer",
    "bigram_similarity",
    "exchanges_of",
    "learn_members",
    "looks_private",
    "offline_members",
]

#: ``members.window_s``: the longest wait, in seconds, of the bot's reply after a member's
#: message (when the reply neither quotes it nor is known by its injection), and of the
#: member's reaction after the reply.
EXCHANGE_WINDOW_S = 120.0
#: ``members.max_members``: the most members asked about in one run.
MAX_MEMBERS = 6
#: ``members.max_exchanges``: the most exchanges (the newest) sent per member.
MAX_EXCHANGES = 8
#: The most known facts of the member sent with the exchanges.
KNOWN_FACTS_SENT = 20
#: The most facts one answer gives, and the longest one.
MAX_FACTS = 5
FACT_CHARS = 60
#: The most relationship facts and guidance lines one answer gives, and the longest one.
MAX_NOTES = 3
NOTE_CHARS = 60
#: The most relationship facts (and guidance lines) a relationship keeps.
NOTES_KEPT = 5
#: ``members.affinity_step``: how far one exchange moves the affinity (its outcome's sign).
AFFINITY_STEP = 0.03
#: A fact this similar (character-bigram Jaccard) to a known one is the same fact.
DUPLICATE_SIMILARITY = 0.6
#: The most person facts and relationships kept per group.
PERSON_FACT_CAP = 400
RELATIONSHIP_CAP = 200
#: The longest text of one line in the payload.
LINE_CHARS = 200
#: Requests awaiting the bot's reply kept in the state (and for how long, in seconds, a reply
#: that quotes one or is known by its injection still finds it).
OPEN_KEPT = 16
OPEN_KEPT_S = 600.0
#: The bot's recent message ids kept in the state, to tell a reply to the bot.
BOTS_KEPT = 16

OUTCOMES = ("positive", "neutral", "negative")
#: The shortest clause the offline rule takes for a topic.
TOPIC_SHORTEST = 4


# -- the answer ------------------------------------------------------------------------------


def _lines(most: int, chars: int) -> Callable[[Any, attrs.Attribute[Any], tuple[str, ...]], None]:
    def check(_instance: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
        if len(value) > most:
            raise ValueError(f"{attribute.name}: at most {most} lines, not {len(value)}")
        for line in value:
            if not isinstance(line, str) or not line.strip():
                raise ValueError(f"{attribute.name}: a blank line")
            if len(line) > chars:
                raise ValueError(f"{attribute.name}: {line[:20]!r}… is over {chars} characters")

    return check


@attrs.frozen(kw_only=True)
class RelationshipAnswer:
    """What the answer says of the relationship: facts of the bot's dealings with the member and
    guidance for talking to them (each at most :data:`MAX_NOTES` lines of :data:`NOTE_CHARS`)."""

    facts: tuple[str, ...] = attrs.field(validator=_lines(MAX_NOTES, NOTE_CHARS))
    guidance: tuple[str, ...] = attrs.field(validator=_lines(MAX_NOTES, NOTE_CHARS))


@attrs.frozen(kw_only=True)
class MembersAnswer:
    """The answer of task ``members``: the member's stable facts (at most :data:`MAX_FACTS` of
    :data:`FACT_CHARS`), the relationship notes, and the exchanges' outcome."""

    facts: tuple[str, ...] = attrs.field(validator=_lines(MAX_FACTS, FACT_CHARS))
    relationship: RelationshipAnswer
    outcome: str = attrs.field(validator=attrs.validators.in_(OUTCOMES))


def _string_list(most: int, chars: int) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "string", "description": f"at most {chars} characters"},
        "maxItems": most,
    }


#: The answer's JSON schema (strict-mode form).
SCHEMA = answer_schema(
    {
        "facts": _string_list(MAX_FACTS, FACT_CHARS),
        "relationship": answer_schema(
            {
                "facts": _string_list(MAX_NOTES, NOTE_CHARS),
                "guidance": _string_list(MAX_NOTES, NOTE_CHARS),
            }
        ),
        "outcome": {"type": "string", "enum": list(OUTCOMES)},
    }
)


# -- text rules ------------------------------------------------------------------------------

_PHONE = lazy_pattern(r"(?<!\d)(?:\+?86[- ]?)?1[3-9]\d[- ]?\d{4}[- ]?\d{4}(?!\d)")
#: Seven digits or more in a row (separators allowed): a phone, ID, card or account number.
_LONG_NUMBER = lazy_pattern(r"\d(?:[- ]?\d){6,}")
_EMAIL = lazy_pattern(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ADDRESS = lazy_pattern(
    r"住在|家住|家在|住址|地址|门牌|"
    r"\d+\s*(?:号楼|栋|幢|单元|室|弄|号院)|"
    r"[路街巷道]\s*\d+\s*号|"
    r"(?:小区|公寓|花园|大厦)\s*\d"
)


def looks_private(text: str, offensive_words: Sequence[str], injection: InjectionDetector) -> str:
    """Why ``text`` is not kept (``phone``, ``number``, ``email``, ``address``, ``link``,
    ``offensive``, ``injection``), or ``""`` when it may be."""
    if _PHONE.search(text):
        return "phone"
    if _LONG_NUMBER.search(text):
        return "number"
    if _EMAIL.search(text):
        return "email"
    if has_url(text):
        return "link"
    if _ADDRESS.search(text):
        return "address"
    folded = text.casefold()
    if any(word and word.casefold() in folded for word in offensive_words):
        return "offensive"
    if injection(text):
        return "injection"
    return ""


def _bigrams(text: str) -> set[str]:
    bare = "".join(char for char in text.casefold() if char.isalnum())
    if len(bare) < 2:
        return {bare} if bare else set()
    return {bare[i : i + 2] for i in range(len(bare) - 1)}


def bigram_similarity(a: str, b: str) -> float:
    """The Jaccard similarity of the character bigrams of ``a`` and ``b`` (letters and digits
    only, case-folded)."""
    left, right = _bigrams(a), _bigrams(b)
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def _normalized(text: str) -> str:
    return "".join(char for char in text.casefold() if char.isalnum()) or text.strip()


def _merged(new: Iterable[str], old: Iterable[str], keep: int) -> list[str]:
    """``new`` then ``old``, each line once (a near-duplicate of an earlier one left out), at
    most ``keep``."""
    kept: list[str] = []
    for line in (*new, *old):
        line = line.strip()
        if line and not any(
            bigram_similarity(line, seen) >= DUPLICATE_SIMILARITY or line == seen for seen in kept
        ):
            kept.append(line)
    return kept[:keep]


# -- the offline rule ------------------------------------------------------------------------

_CLAUSE_END = "，,。.！!？?~～；;、…\n "
_OBJECT = r"(?P<x>[^，,。.！!？?~～；;、…\s]{1,30})"
#: The cues of a stable preference or fact in a member's own line, and the fact each makes.
_CUES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (lazy_pattern(pattern + _OBJECT), fact)
    for pattern, fact in (
        (r"我(?:也|还|就|真的|其实)?不(?:太|怎么)?喜欢", "ta 不喜欢{x}"),
        (r"我(?:也|还|就|真的|其实)?讨厌", "ta 讨厌{x}"),
        (r"我(?:也|还|就|真的|其实)?(?:很|超|最|特别|挺|超级|巨)?喜欢", "ta 喜欢{x}"),
        (r"我最近在", "ta 最近在{x}"),
        (r"我(?:也|还|就)?在学", "ta 在学{x}"),
        (r"我(?:家)?养了", "ta 养了{x}"),
        (r"我是", "ta 是{x}"),
    )
)
#: What follows 我是 that makes no fact of it (「我是说」「我是不是」).
_NOT_IDENTITY = ("说", "不是", "不", "真的", "来", "想", "觉得", "在", "怕", "因为", "问")
_POSITIVE = ("哈哈", "谢谢", "好耶", "确实", "感谢", "谢啦", "太好了", "笑死", "有道理")
_EXTRA_NEGATIVE = ("无语",)
#: 别 as a request to stop (「别闹」), not inside 特别, 别的, 区别…
_DONT = lazy_pattern(r"(?<![特区分告级类性识辨差个])别(?![的人处致墅针名])")


def _clauses(text: str) -> list[str]:
    clauses, current = [], ""
    for char in text:
        if char in _CLAUSE_END:
            if current:
                clauses.append(current)
            current = ""
        else:
            current += char
    return [*clauses, current] if current else clauses


def _first_clause(text: str, chars: int, shortest: int = 1) -> str:
    """The first clause of ``text`` of at least ``shortest`` characters, cut to ``chars``."""
    return next((c[:chars] for c in _clauses(text) if len(c) >= shortest), "")


def _is_negative(text: str) -> bool:
    folded = text.casefold()
    return (
        any(word in folded for word in (*NEGATIVE_WORDS, *_EXTRA_NEGATIVE))
        or _DONT.search(text) is not None
    )


def _is_positive(text: str) -> bool:
    folded = text.casefold()
    return any(word in folded for word in _POSITIVE)


def _cue_facts(line: str) -> list[str]:
    """The facts of ``line``'s cues, in the order of :data:`_CUES`; one fact per 我 (the first
    cue that matches there)."""
    facts = []
    taken: set[int] = set()
    for pattern, template in _CUES:
        for match in pattern.finditer(line):
            thing = match.group("x")
            if match.start() in taken or (
                template.startswith("ta 是") and thing.startswith(_NOT_IDENTITY)
            ):
                continue
            taken.add(match.start())
            facts.append(template.replace("{x}", thing)[:FACT_CHARS])
    return facts


def offline_members(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The offline learning model's answer to task ``members``: rules over the payload's text,
    not a model.

    - facts: in the member's own lines (their messages and reactions, questions left out), the
      cues of a stable preference (我喜欢X, 我不喜欢X, 我讨厌X, 我在学X, 我最近在X, 我养了X, 我是X)
      become 「ta 喜欢X」…, X cut at the first punctuation; a fact like a known one is left out; at
      most :data:`MAX_FACTS`.
    - relationship facts: 「和{self}聊过X」, X the first clause (at most 20 characters) of the
      first exchange's member line, of at least :data:`TOPIC_SHORTEST` characters (「嗯」「记住」
      name no topic); none when it has no such clause.
    - guidance: a reaction with a negative word (the negative-feedback words, 无语, 别…) gives
      「ta 不喜欢被这样回：…」 with the bot's reply's first clause; a reaction asking back gives
      「ta 爱追问，回答要具体」.
    - outcome: per exchange, a reaction with a negative word is negative, else one with 哈哈,
      谢谢, 好耶, 确实… is positive, else neutral; the more common of positive and negative wins,
      a tie (or none) is neutral.
    """
    exchanges = [e for e in payload.get("exchanges", ()) if isinstance(e, Mapping)]
    known = [str(fact) for fact in payload.get("known_facts", ())]
    self_label = str(payload.get("self", "")) or "bot"
    facts: list[str] = []
    for exchange in exchanges:
        for key in ("member", "reaction"):
            line = str(exchange.get(key) or "")
            if not line or is_question(line):
                continue
            for fact in _cue_facts(line):
                if not any(
                    bigram_similarity(fact, seen) >= DUPLICATE_SIMILARITY for seen in known + facts
                ):
                    facts.append(fact)
    notes: list[str] = []
    if exchanges:
        topic = _first_clause(str(exchanges[0].get("member") or ""), 20, TOPIC_SHORTEST)
        if topic:
            notes.append(f"和{self_label}聊过{topic}"[:NOTE_CHARS])
    guidance: list[str] = []
    tally: Counter[str] = Counter()
    for exchange in exchanges:
        reaction = str(exchange.get("reaction") or "")
        if not reaction:
            continue
        if _is_negative(reaction):
            tally["negative"] += 1
            said = _first_clause(str(exchange.get("bot") or ""), 30)
            if said:
                guidance.append(f"ta 不喜欢被这样回：{said}"[:NOTE_CHARS])
        elif _is_positive(reaction):
            tally["positive"] += 1
        if is_question(reaction):
            guidance.append("ta 爱追问，回答要具体")
    if tally["positive"] > tally["negative"]:
        outcome = "positive"
    elif tally["negative"] > tally["positive"]:
        outcome = "negative"
    else:
        outcome = "neutral"
    return {
        "facts": facts[:MAX_FACTS],
        "relationship": {
            "facts": list(dict.fromkeys(notes))[:MAX_NOTES],
            "guidance": list(dict.fromkeys(guidance))[:MAX_NOTES],
        },
        "outcome": outcome,
    }


# -- finding exchanges -----------------------------------------------------------------------


def _text(message: ChatMessage, names: Sequence[str]) -> str:
    return clean_text(strip_address(message.text, names))[:LINE_CHARS]


def _injection_answering(batch: LearnerBatch, message_id: str) -> str | None:
    """The message a delivered bot message answered, as its kept injection says (``None`` when
    none is kept)."""
    learned = getattr(batch.stores, "learned", None)
    if learned is None:
        return None
    injection = learned.injection(batch.bot_id, batch.group_id, message_id)
    return None if injection is None else (injection.answering or "")


def exchanges_of(batch: LearnerBatch, window: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The exchanges the batch completes (oldest first), and the state to keep: the requests
    still awaiting the bot's reply, the exchanges awaiting a reaction, the bot's recent ids.

    Each exchange: ``user_id``, ``name``, ``member`` (the member's text, the bot's address
    stripped), ``bot`` (its reply's text), ``reaction`` (or ``""``), ``ids`` (the messages)."""
    names = _bot_names(batch)
    state = batch.state
    open_requests: list[dict[str, Any]] = [dict(r) for r in state.get("open", ())]
    awaiting: list[dict[str, Any]] = [dict(e) for e in state.get("awaiting", ())]
    bots: list[str] = [str(b) for b in state.get("bots", ())]
    last_reply: dict[str, Any] | None = None  # the exchange a further bubble would join
    done: list[dict[str, Any]] = []

    def close_expired(ts: float) -> None:
        for exchange in list(awaiting):
            if not _within(ts, exchange["bot_ts"], window):
                awaiting.remove(exchange)
                done.append(exchange)

    def to_bot(message: ChatMessage) -> bool:
        if message.addressed or batch.bot_id in message.mentions:
            return True
        if message.reply_to is None:
            return False
        if message.reply_to in bots:
            return True
        quoted = _find(batch, message.reply_to)
        return quoted is not None and quoted.sender_id == batch.bot_id

    for logged in batch.messages:
        message: ChatMessage = logged.message
        ts = _ts(message)
        close_expired(ts)
        open_requests = [r for r in open_requests if _within(ts, r["ts"], OPEN_KEPT_S)]
        if message.sender_id == batch.bot_id:
            if message.id is None:
                continue
            bots = [*bots, message.id][-BOTS_KEPT:]
            text = clean_text(message.text)[:LINE_CHARS]
            answering = _injection_answering(batch, message.id)
            request = None
            if answering:
                request = next((r for r in open_requests if r["id"] == answering), None)
            elif answering is None and message.reply_to is not None:
                request = next((r for r in open_requests if r["id"] == message.reply_to), None)
            if request is None and answering is None and message.reply_to is None:
                fresh = [
                    r for r in open_requests if not r["passed"] and _within(ts, r["ts"], window)
                ]
                request = fresh[-1] if fresh else None
            for r in open_requests:
                r["passed"] = True
            if request is not None:
                open_requests.remove(request)
                last_reply = {
                    "user_id": request["user_id"],
                    "name": request["name"],
                    "member": request["text"],
                    "bot": text,
                    "reaction": "",
                    "ids": [request["id"], message.id],
                    "bot_ts": ts,
                }
                awaiting.append(last_reply)
            elif last_reply is not None and last_reply in awaiting and text:
                # a further bubble of the same reply
                last_reply["bot"] = f"{last_reply['bot']} {text}".strip()[:LINE_CHARS]
                last_reply["ids"].append(message.id)
                last_reply["bot_ts"] = ts
            continue
        if message.sender_id in batch.bot_ids:
            continue  # a peer bot: never a member, never a reaction
        last_reply = None
        text = _text(message, names)
        mine = next((e for e in awaiting if e["user_id"] == message.sender_id), None)
        if mine is not None and message.id is not None and text:
            awaiting.remove(mine)
            mine["reaction"] = text
            mine["ids"].append(message.id)
            done.append(mine)
        if message.id is not None and text and not is_command(message.text) and to_bot(message):
            open_requests.append(
                {
                    "id": message.id,
                    "user_id": message.sender_id,
                    "name": message.sender_name,
                    "text": text,
                    "ts": ts,
                    "passed": False,
                }
            )
            open_requests = open_requests[-OPEN_KEPT:]
    now = batch.now.timestamp()
    close_expired(now)
    open_requests = [r for r in open_requests if _within(now, r["ts"], OPEN_KEPT_S)]
    kept = {"open": open_requests, "awaiting": awaiting, "bots": bots}
    return done, kept


# -- the learner -----------------------------------------------------------------------------


def _persona_name(batch: LearnerBatch) -> str:
    pack = batch.persona or default_pack()
    return pack.persona.name


def _self_label(batch: LearnerBatch) -> str:
    pack = batch.persona or default_pack()
    return pack.labels.self_label


def learn_members(batch: LearnerBatch) -> LearnerResult:
    """Ask the learning model about the members the batch's exchanges were with (see the
    module's docs), and store their facts and relationships."""
    if not batch.group_id or batch.model is None:
        return LearnerResult()
    window = _number(batch, "window_s", EXCHANGE_WINDOW_S)
    max_members = _integer(batch, "max_members", MAX_MEMBERS, minimum=1)
    max_exchanges = _integer(batch, "max_exchanges", MAX_EXCHANGES, minimum=1)
    step = _number(batch, "affinity_step", AFFINITY_STEP)
    offensive = _words(batch, "offensive_words", OFFENSIVE_WORDS)
    injection = InjectionDetector(_persona_name(batch))
    done, state = exchanges_of(batch, window)
    by_member: dict[str, list[dict[str, Any]]] = {}
    for exchange in done:
        by_member.setdefault(exchange["user_id"], []).append(exchange)
    ranked = sorted(by_member, key=lambda uid: -len(by_member[uid]))  # stable: first seen first
    skipped: Counter[str] = Counter()
    if len(ranked) > max_members:
        skipped["members_over_max"] += len(ranked) - max_members
    learned = getattr(batch.stores, "learned", None)
    items: list[LearnedItem] = []
    self_label = _self_label(batch)
    for user_id in ranked[:max_members]:
        exchanges = by_member[user_id][-max_exchanges:]
        rel_key = item_key("relationship", user_id)
        known_items = (
            []
            if learned is None
            else sorted(
                learned.items(batch.bot_id, batch.group_id, kind="person_fact", user_id=user_id),
                key=lambda item: item.updated_at or item.learned_at,
                reverse=True,
            )
        )
        known = [str(item.fields.get("text", "")) for item in known_items][:KNOWN_FACTS_SENT]
        old = (
            None
            if learned is None
            else learned.item(batch.bot_id, batch.group_id, "relationship", rel_key)
        )
        old_fields: Mapping[str, Any] = old.fields if old is not None else {}
        payload = {
            "self": self_label,
            "member": {"user_id": user_id, "name": exchanges[-1]["name"]},
            "exchanges": [
                {"member": e["member"], "bot": e["bot"], "reaction": e["reaction"]}
                for e in exchanges
            ],
            "known_facts": known,
            "relationship": (
                {
                    "facts": list(old_fields.get("facts", ())),
                    "guidance": list(old_fields.get("guidance", ())),
                    "affinity": float(old_fields.get("affinity", 0.0)),
                }
                if old is not None
                else {}
            ),
        }
        task = model_task(
            batch,
            "members",
            MembersAnswer,
            SCHEMA,
            payload,
            offline_members,
            values={
                "member": exchanges[-1]["name"] or f"#{user_id[-4:]}",
                "fact_chars": FACT_CHARS,
                "max_facts": MAX_FACTS,
                "max_notes": MAX_NOTES,
                "note_chars": NOTE_CHARS,
            },
        )
        answer = batch.model.ask(task)
        if answer is None:
            skipped["invalid_answer"] += 1
            continue
        member_ids = [e["ids"][0] for e in exchanges]
        all_ids = [i for e in exchanges for i in e["ids"]]
        seen = list(known)
        for fact in answer.facts:
            fact = fact.strip()
            reason = looks_private(fact, offensive, injection)
            if not reason and any(
                bigram_similarity(fact, other) >= DUPLICATE_SIMILARITY for other in seen
            ):
                reason = "duplicate"
            if reason:
                skipped[f"fact_{reason}"] += 1
                continue
            seen.append(fact)
            items.append(
                _item(
                    batch,
                    "person_fact",
                    item_key(user_id, _normalized(fact)),
                    {"text": fact},
                    user_id=user_id,
                    ids=member_ids,
                )
            )
        notes = {}
        for part in ("facts", "guidance"):
            new = []
            for line in getattr(answer.relationship, part):
                reason = looks_private(line, offensive, injection)
                if reason:
                    skipped[f"note_{reason}"] += 1
                else:
                    new.append(line.strip())
            old_lines = [str(line) for line in old_fields.get(part, ()) if isinstance(line, str)]
            notes[part] = _merged(new, old_lines, NOTES_KEPT)
        sign = {"positive": 1, "negative": -1}.get(answer.outcome, 0)
        old_affinity = old_fields.get("affinity", 0.0)
        if isinstance(old_affinity, bool) or not isinstance(old_affinity, int | float):
            old_affinity = 0.0
        affinity = max(-1.0, min(1.0, float(old_affinity) + sign * step * len(exchanges)))
        old_count = old_fields.get("exchanges", 0)
        count = (old_count if isinstance(old_count, int) else 0) + len(exchanges)
        fields = {**notes, "affinity": round(affinity, 6), "exchanges": count}
        items.append(_item(batch, "relationship", rel_key, fields, user_id=user_id, ids=all_ids))
    return _result(items, state=state, notes=_skipped(skipped, "of the members' answers"))


LEARNER = Learner(
    name="members",
    writes=("person_fact", "relationship"),
    run=learn_members,
    min_batch=20,
    interval_s=600.0,
    timeout_s=300.0,
    caps={"person_fact": PERSON_FACT_CAP, "relationship": RELATIONSHIP_CAP},
    uses_model=True,
    description="each member's stable facts and the bot's relationship with them, from their "
    "exchanges with the bot (learning model)",
)


@hookimpl
def register_learners(register: Callable[[Learner], None]) -> None:
    register(LEARNER)
