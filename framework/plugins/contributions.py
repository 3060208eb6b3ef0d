"""The records plugins give to the core through the ``register_*`` hooks
(``docs/writing_plugins.md``).

Every record is ``@attrs.frozen(kw_only=True)``: adding a field later never breaks a plugin.
"""

from __future__ import annotations

import enum
import random
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from promptweave._fields import str_tuple

if TYPE_CHECKING:
    import datetime as dt

    from promptweave.config import Config
    from promptweave.prompt.render_context import RenderContext
    from promptweave.store.learned import LearnedItem, LoggedMessage
    from promptweave.store.stores import Stores
    from promptweave.text.persona import PersonaPack

__all__ = [
    "DEFAULT_RULE_ORDER",
    "READS_CONTEXT",
    "DecisionRule",
    "Learner",
    "LearnerBatch",
    "LearnerResult",
    "ModelAsker",
    "OverrideMode",
    "PhrasePool",
    "Retriever",
    "RuleStage",
    "Section",
    "SectionOverride",
    "Tool",
    "ToolCallContext",
    "Volatility",
]

_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class Volatility(enum.StrEnum):
    """How often a section's text changes, least to most volatile.

    Sections are ordered so that less volatile ones come first: a provider's prompt cache can then
    reuse the longest possible byte-identical prefix
    (``docs/design.md#why-least-to-most-volatile``).

    - ``static``: depends only on the persona pack, the configuration, the bot and the group; the
      runtime renders it once per (bot, group) and reuses the text on later turns.
    - ``profile``: what was learned of a group; changes slowly.
    - ``retrieval``: what was retrieved for the current message.
    - ``turn``: changes on every turn (timeline, time, policy, tool results).
    """

    STATIC = "static"
    PROFILE = "profile"
    RETRIEVAL = "retrieval"
    TURN = "turn"

    @property
    def rank(self) -> int:
        return list(Volatility).index(self)


class RuleStage(enum.StrEnum):
    """The routing stage a :class:`DecisionRule` belongs to
    (``docs/design.md#the-routing-flow``)."""

    GATE = "gate"
    NECESSITY = "necessity"
    DECIDE = "decide"


class OverrideMode(enum.StrEnum):
    """What a :class:`SectionOverride` does to a section's text."""

    REPLACE = "replace"
    APPEND = "append"
    DISABLE = "disable"


def _check_id(kind: str) -> Callable[[Any, attrs.Attribute[Any], str], None]:
    def check(_instance: Any, _attribute: attrs.Attribute[Any], value: str) -> None:
        if not _ID.match(value):
            raise ValueError(
                f"{kind} id {value!r} must be lowercase letters, digits and underscores, "
                "starting with a letter"
            )

    return check


def _check_anchor(_instance: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and not _ID.match(value):
        raise ValueError(f"{attribute.name}={value!r} is not a valid section id")


#: In ``Section.reads``, a name that starts with this is a path of the render context
#: (``"context.turn.tool_context"``); any other name is a section id, whose items are read.
READS_CONTEXT = "context."


def _reads(
    value: Callable[[RenderContext], Hashable] | Iterable[str] | None,
) -> Callable[[RenderContext], Hashable] | tuple[str, ...] | None:
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        raise TypeError(f"reads={value!r}: give a tuple of names, not one string")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"reads={names!r}: {name!r} is not a name")
        if name.startswith(READS_CONTEXT):
            path = name[len(READS_CONTEXT) :].split(".")
            if all(part.isidentifier() and not part.startswith("_") for part in path):
                continue
            raise ValueError(f"reads={names!r}: {name!r} is not a path of the render context")
        if not _ID.match(name):
            raise ValueError(f"reads={names!r}: {name!r} is not a valid section id")
    return names


@attrs.frozen(kw_only=True)
class Section:
    """One system-prompt section.

    :param id: unique section id, for example ``"memory"``; overrides and placement refer to it.
    :param title: the header the section writes, for listings (``"【相关旧话题】"``).
    :param render: ``render(context) -> str | None``; ``None`` or ``""`` leaves the section out.
    :param after: place the section right after this section id.
    :param before: place the section right before this section id.
    :param volatility: how often the text changes; see :class:`Volatility`.
    :param replace: ``True`` to replace an already registered section with the same id.
    :param reads: what the text depends on besides the persona pack and the settings, optional:
        either names, read by the runtime itself (section ids, whose retrieved items are read,
        and paths of the render context such as ``"context.turn.tool_context"``), or
        ``reads(context) -> value`` returning everything it reads as a hashable value. When
        what it reads equals what it read on an earlier turn, the section is not rendered again
        and its finished block of that turn is reused (``docs/sections.md``); an unhashable value
        renders the section as usual.
    """

    id: str = attrs.field(validator=_check_id("section"))
    title: str
    render: Callable[[RenderContext], str | None]
    after: str | None = attrs.field(default=None, validator=_check_anchor)
    before: str | None = attrs.field(default=None, validator=_check_anchor)
    volatility: Volatility = attrs.field(default=Volatility.TURN, converter=Volatility)
    replace: bool = False
    reads: Callable[[RenderContext], Hashable] | tuple[str, ...] | None = attrs.field(
        default=None, converter=_reads
    )

    def __attrs_post_init__(self) -> None:
        if self.after is not None and self.before is not None:
            raise ValueError(f"section {self.id!r}: give either after= or before=, not both")
        if self.id in (self.after, self.before):
            raise ValueError(f"section {self.id!r} cannot be placed relative to itself")


@attrs.frozen(kw_only=True)
class Retriever:
    """A source of data for one section.

    :param name: unique retriever name.
    :param feeds: the id of the section whose items it contributes.
    :param retrieve: ``retrieve(query)``, sync or async, returning an iterable of items.
    :param timeout_s: the longest the runtime waits for it; a late retriever is left out and traced.
    :param persistent: ``True`` when it reads persistent memory (skipped on short social turns).
    :param blocking: whether a synchronous ``retrieve`` may block (disk, network): such a call runs
        in a worker thread, so its timeout can be enforced. A non-blocking one (pure computation
        over memory) runs on the caller's thread (with no event loop under ``render()`` when
        no retriever of the turn waits), which saves a thread hop and GIL contention; its
        timeout is checked when it returns. A callable decides per query (``blocking(query)``).
        Async retrievers ignore it.
    """

    name: str = attrs.field(validator=_check_id("retriever"))
    feeds: str = attrs.field(validator=_check_id("section"))
    retrieve: Callable[..., Any]
    timeout_s: float = attrs.field(default=2.0, validator=attrs.validators.gt(0))
    persistent: bool = True
    blocking: bool | Callable[..., bool] = True


#: The order of a rule that gives none (a replacement takes the replaced rule's order instead).
DEFAULT_RULE_ORDER = 100


@attrs.frozen(kw_only=True)
class DecisionRule:
    """A routing rule (``docs/routing.md``).

    :param name: unique rule name, shown in the decision trace.
    :param stage: ``gate``, ``necessity`` or ``decide``.
    :param evaluate: ``evaluate(route_context)``; a ``gate`` rule returns a
        :class:`promptweave.GateSkip` or ``None``, a ``necessity`` rule a :class:`promptweave.ScoreTerm`
        or ``None``, a ``decide`` rule a :class:`promptweave.Decision` or ``None``.
    :param order: rules of one stage run in ascending order; the first match wins. ``None`` means
        100, or, with ``replace=True``, the order of the rule replaced. The built-in rules use
        1000 and above, so a plugin's rule runs before them unless it asks otherwise.
    :param replace: ``True`` to replace the already registered rule of the same name.
    """

    name: str = attrs.field(validator=_check_id("rule"))
    stage: RuleStage = attrs.field(converter=RuleStage)
    evaluate: Callable[..., Any]
    order: int | None = None
    replace: bool = False

    @property
    def effective_order(self) -> int:
        return DEFAULT_RULE_ORDER if self.order is None else self.order


def _phrase_tuple(value: Any) -> tuple[str, ...]:
    return tuple(str(phrase) for phrase in value)


@attrs.frozen(kw_only=True)
class PhrasePool:
    """Short canned phrases for the low-engagement exit (``docs/design.md#low-engagement-exit``).

    :param name: unique pool name.
    :param phrases: the phrases it always offers.
    :param applies: ``applies(query) -> bool`` with a :class:`promptweave.PoolQuery`; ``None`` means
        the pool always applies.
    :param phrases_for: ``phrases_for(query)`` returns more phrases for this query, for pools
        whose phrases depend on the group (its own short phrases) or the moment.
    """

    name: str = attrs.field(validator=_check_id("pool"))
    phrases: tuple[str, ...] = attrs.field(default=(), converter=_phrase_tuple)
    applies: Callable[..., bool] | None = None
    phrases_for: Callable[..., Iterable[str]] | None = None


@attrs.frozen(kw_only=True)
class SectionOverride:
    """What an ``override_section`` implementation does to one section.

    :param mode: ``replace`` (use ``content`` instead), ``append`` (add ``content`` after a blank
        line) or ``disable`` (leave the section out).
    :param content: the text for ``replace`` and ``append``; ignored for ``disable``.
    """

    mode: OverrideMode = attrs.field(converter=OverrideMode)
    content: str = attrs.field(default="", validator=attrs.validators.instance_of(str))

    def apply(self, text: str) -> str:
        """Return the section text after this override."""
        if self.mode is OverrideMode.DISABLE:
            return ""
        if self.mode is OverrideMode.REPLACE:
            return self.content
        return "\n\n".join(part.strip() for part in (text, self.content) if part.strip())


@attrs.frozen(kw_only=True)
class ToolCallContext:
    """Who is asking for a tool, where: what a tool's permission predicate and its call receive.

    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param user_id: the speaker's account id.
    :param sender_role: the speaker's role in the group as the platform reports it: ``owner``,
        ``admin`` or ``member`` (``member`` when unknown; a private chat reports ``member``).
    :param text: the text of the message that asked.
    :param rng: the runtime's random source (seeded in a replay, so a dice roll repeats).
    :param stores: the runtime's :class:`promptweave.Stores`, for tools that read what the bot
        knows (``None`` outside a runtime).
    """

    bot_id: str
    group_id: str | None
    user_id: str
    sender_role: str = "member"
    text: str = ""
    rng: random.Random = attrs.field(factory=random.Random, eq=False, repr=False)
    stores: Any = attrs.field(default=None, eq=False, repr=False)


def _everyone(_context: ToolCallContext) -> bool:
    return True


def _json_schema(_instance: Any, _attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping) or value.get("type") != "object":
        raise ValueError("tool parameters must be a JSON schema object: {'type': 'object', ...}")


@attrs.frozen(kw_only=True)
class Tool:
    """A tool the model may call on a ``tool`` turn (``docs/bot.md``, "Tools").

    :param name: unique tool name, offered to the model as the function's name.
    :param description: what the tool does, for the model.
    :param parameters: the JSON schema of its arguments (an ``object`` schema).
    :param call: ``call(arguments, context)`` returns the result text (or an awaitable of it);
        ``arguments`` is the decoded JSON object the model sent, ``context`` a
        :class:`ToolCallContext`. A call that raises or outlasts ``[loop] tool_timeout_s`` is
        answered to the model as failed.
    :param permitted: ``permitted(context) -> bool``: may this speaker use the tool here? A refused
        call is answered to the model as refused. Everyone may, by default.
    :param intent_words: words that make an addressed message *require* this tool (the routing's
        ``tool_intent``), so the turn is decided ``tool`` when the speaker is permitted.
    """

    name: str = attrs.field(validator=_check_id("tool"))
    description: str
    parameters: Mapping[str, Any] = attrs.field(validator=_json_schema)
    call: Callable[..., Any]
    permitted: Callable[[ToolCallContext], bool] = _everyone
    intent_words: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)


# -- learners ----------------------------------------------------------------------------------


def _json_mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if value is None else dict(value)


def _caps(value: Mapping[str, int]) -> dict[str, int]:
    caps = dict(value)
    for kind, cap in caps.items():
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise ValueError(f"cap of {kind!r} must be a whole number of at least 1, not {cap!r}")
    return caps


@runtime_checkable
class ModelAsker(Protocol):
    """The learning model as a learner run, a session summary or an image description sees it
    (:class:`promptweave.learning.model.RunModel`): ``ask(task)`` sends a
    :class:`promptweave.learning.model.ModelTask` and returns its valid answer, or ``None``; it
    raises :class:`promptweave.learning.budget.BudgetSpent` while ``[learning.budget]`` is spent
    and :class:`promptweave.learning.model.ModelUnavailable` when the provider fails. ``persona``
    is the runtime's persona pack, where a task's prompt is read (``None``: the bundled default)."""

    @property
    def label(self) -> str: ...

    @property
    def offline(self) -> bool: ...

    @property
    def vision(self) -> bool: ...

    @property
    def persona(self) -> PersonaPack | None: ...

    def ask(self, task: Any) -> Any: ...


@attrs.frozen(kw_only=True)
class Learner:
    """A learner: what it reads, what kinds of item it writes, and its run (``docs/learning.md``).

    The learner stage calls ``run(batch)`` in the background, per (bot, group), with the group-log
    messages appended after the learner's cursor (:class:`LearnerBatch`); the
    :class:`LearnerResult` it returns is stored, then the cursor moves past the batch. A run that
    raises or outlasts ``timeout_s`` keeps the cursor and is retried later, with backoff; it is
    traced and never affects a turn.

    :param name: unique learner name (its ``[learning.learners.NAME]`` table).
    :param writes: the item kinds it writes (``expression_pair``, ``rhythm``…).
    :param run: ``run(batch) -> LearnerResult | None``; synchronous, called in a worker thread.
    :param reads: what it reads; ``group_log``: the group's messages, the bot's own included.
    :param min_batch: it runs once this many new messages wait…
    :param interval_s: …or once this long has passed since new messages started waiting.
    :param max_batch: the most messages one run receives.
    :param timeout_s: the longest one run may take.
    :param caps: the most items of each kind kept per (bot, group), beyond which the least
        counted, then least recently learned, are evicted; ``[learning.learners.NAME] max_items``
        overrides the cap of every kind it writes.
    :param stored: ``stored(items, stores)`` after its items were stored (the negative-feedback
        learner records the outcome's phrases in the feedback ledger there).
    :param forgotten: ``forgotten(items, stores)`` after items of its kinds were forgotten.
    :param description: one line for ``docs`` and ``promptweave learn``.
    :param uses_model: it asks the learning model (``batch.model``): it runs only when one is
        configured (``[learning.model]``), and waits while ``[learning.budget]`` is spent.
    """

    name: str = attrs.field(validator=_check_id("learner"))
    writes: tuple[str, ...] = attrs.field(converter=str_tuple)
    run: Callable[..., Any]
    reads: str = "group_log"
    min_batch: int = attrs.field(default=20, validator=attrs.validators.ge(1))
    interval_s: float = attrs.field(default=60.0, validator=attrs.validators.ge(0))
    max_batch: int = attrs.field(default=500, validator=attrs.validators.ge(1))
    timeout_s: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    caps: Mapping[str, int] = attrs.field(factory=dict, converter=_caps)
    stored: Callable[..., Any] | None = None
    forgotten: Callable[..., Any] | None = None
    description: str = ""
    uses_model: bool = False


@attrs.frozen(kw_only=True)
class LearnerBatch:
    """What one run of a learner receives.

    :param messages: the group-log messages after the cursor, in the order appended
        (:class:`promptweave.store.learned.LoggedMessage`: ``position`` and ``message``).
    :param state: what the learner's last run left (``LearnerResult.state``), ``{}`` at first.
    :param now: the time of the run (the log's clock in a replay).
    :param bot_ids: the bot's own account and its peer bots: their messages are not a human's.
    :param bot_names: the bot's name and aliases as its turns see them (``[bots."ID"]``, else the
        persona pack's): how members address it in text.
    :param settings: the learner's ``[learning.learners.NAME]`` table, beyond the keys the stage
        reads itself.
    :param stores: the runtime's stores (``stores.learned``: what was learned; ``stores.group_log``
        to find a quoted message).
    :param config: the runtime's configuration.
    :param persona: the runtime's persona pack (the prompts of the model learners:
        ``[learning_prompts.NAME]``).
    :param model: for a learner that ``uses_model``, the learning model as this run sees it
        (:class:`promptweave.learning.model.RunModel`: ``model.ask(task)``); ``None`` otherwise.
    """

    learner: str
    bot_id: str
    group_id: str
    messages: tuple[LoggedMessage, ...]
    state: Mapping[str, Any] = attrs.field(factory=dict, converter=_json_mapping)
    now: dt.datetime
    bot_ids: frozenset[str] = frozenset()
    bot_names: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    settings: Mapping[str, Any] = attrs.field(factory=dict, converter=_json_mapping)
    stores: Stores | None = None
    config: Config | None = None
    persona: PersonaPack | None = None
    model: ModelAsker | None = None


def _learned_items(values: Iterable[LearnedItem]) -> tuple[LearnedItem, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class LearnerResult:
    """What a learner's run learned.

    :param items: the learned items (:class:`promptweave.store.learned.LearnedItem`).
    :param state: the state to keep for the next run (JSON-safe, small); ``None`` keeps the old.
    :param notes: what it decided not to learn, and why, for the log and the trace
        (``"2 pairs skipped: offensive"``).
    """

    items: tuple[LearnedItem, ...] = attrs.field(default=(), converter=_learned_items)
    state: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
