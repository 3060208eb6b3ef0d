"""Every hook a promptweave plugin can implement.

Hooks are grouped by phase. Contribution hooks receive a ``register`` callback, so the core knows
which plugin contributed what and can refuse a duplicate with an error naming both plugins.
Each hook is mirrored in ``docs/plugin_hooks.md`` under a heading that is its exact signature.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from promptweave.config import Config
    from promptweave.decision import RouteContext
    from promptweave.delivery.outgoing import (
        ModelAnswer,
        OutgoingMessage,
        ReplyInjection,
        Segment,
        SendReceipt,
        Transport,
    )
    from promptweave.items import ReplyShape
    from promptweave.loop.events import IncomingEvent
    from promptweave.messages.prompt_message import (
        FetchedImage,
        ImageLimits,
        PromptMessage,
        WordingHint,
    )
    from promptweave.plugins.contributions import (
        DecisionRule,
        Learner,
        ModelAsker,
        PhrasePool,
        Retriever,
        Section,
        SectionOverride,
        Tool,
    )
    from promptweave.prompt.render_context import RenderContext
    from promptweave.providers.exchange import ProviderRequest, SubmitResult
    from promptweave.store.session_rows import SessionTurn
    from promptweave.turn import ChatMessage, HistoryEntry

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME = "promptweave"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -------------------------------------------------------------------------
# Start-up: contributions, collected once when the plugin manager is built
# -------------------------------------------------------------------------


@hookspec
def register_sections(register: Callable[[Section], None]) -> None:
    """Contribute system-prompt sections.

    Runs once at start-up, for every plugin, built-ins first. Call ``register`` once per section.
    The built-in plugins register the fifteen documented sections in their canonical order.

    :param register: ``register(section)``; raises
        :class:`promptweave.errors.DuplicateRegistrationError` when the id is taken and
        ``section.replace`` is false, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_retrievers(register: Callable[[Retriever], None]) -> None:
    """Contribute retrievers, each feeding items to one section.

    Runs once at start-up. Every turn, each retriever's ``retrieve`` receives a
    :class:`promptweave.RetrievalQuery` and returns an iterable of items for the section it feeds, or
    a :class:`promptweave.RetrievalResult`. The retrievers of a turn run concurrently (sync ones in
    worker threads), each within its timeout; one that raises or times out is left out and traced.
    Retrievers registered with ``persistent=True`` are not called on a short social turn. The
    built-in plugin ``retrievers`` registers one retriever per section 4–10.

    :param register: ``register(retriever)``; a duplicate name raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_decision_rules(register: Callable[[DecisionRule], None]) -> None:
    """Contribute routing rules for the ``gate``, ``necessity`` or ``decide`` stage.

    Runs once at start-up. Within a stage, rules run by ascending ``order``; the first match wins.
    The built-in plugin ``routing_rules`` registers the gates, the reply-necessity terms and the
    decide rules of ``docs/routing.md``.

    :param register: ``register(rule)``; a duplicate name raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_low_engagement_pools(register: Callable[[PhrasePool], None]) -> None:
    """Contribute phrase pools for the low-engagement exit.

    Runs once at start-up. The built-in plugin ``phrase_pools`` registers ``group_phrases`` (the
    group's own short replies from its stored expression pairs), ``gentle``, ``emotion_tangent``
    (for messages with emotion words) and ``emoji_fallback``.

    :param register: ``register(pool)``; a duplicate name raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_persona_packs(register: Callable[[str, Path], None]) -> None:
    """Make persona packs available by name (``persona_pack = "NAME"`` in ``promptweave.toml``).

    Runs once at start-up. The built-in plugin registers ``default``.

    :param register: ``register(name, path)``; ``path`` is the pack's TOML file. A duplicate name
        raises, naming both plugins.
    :returns: nothing; the return value is ignored.
    """


# -------------------------------------------------------------------------
# Per turn: assembly
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def override_section(
    section_id: str,
    text: str,
    bot_id: str,
    group_id: str,
    context: RenderContext,
) -> SectionOverride | None:
    """Override one section's text for one bot in one group.

    Runs for every section of every group-chat turn, after the section rendered and before it is
    sanitized. Never runs for a private chat, nor for a turn when every implementing plugin also
    defines ``has_overrides(context)`` and it returns ``False`` (``docs/plugin_hooks.md``). The
    built-in implementation reads the overrides file of ``promptweave.toml`` and is ``trylast``,
    so any other plugin's answer wins.

    Stops at first non-None result.

    :param section_id: the section's id, for example ``"persona"``.
    :param text: the section's rendered text (``""`` when it rendered nothing).
    :param bot_id: the bot's account id.
    :param group_id: the group's id.
    :param context: the turn's render context. When sections are only listed
        (``promptweave sections``), a preview context whose message is empty.
    :returns: a :class:`promptweave.SectionOverride`, or ``None`` to leave the section as it is.
    """


@hookspec
def collect_wording_hints(
    context: RenderContext, history: Sequence[HistoryEntry]
) -> Sequence[WordingHint] | None:
    """Contribute wording hints (措辞提示) for this turn: how to open and close, not to repeat
    a recent reply in the same words, the tone of a greeting (``docs/messages.md``).

    Runs once per assembled turn (``render`` included), after the sections and before the
    message sequence is fitted into ``[budget] chars``. Every implementation's hints are kept,
    in the order pluggy calls them; each becomes a user message of its own just before the
    current message (source ``wording_hint:<kind>``), counted and trimmed by the budget like any
    message. An implementation that raises, hangs past the turn's deadline or answers anything but
    :class:`promptweave.WordingHint` records is left out and traced; the others still deliver.
    The built-in plugin ``wording_hints`` gives the ``repeat``, ``opening``, ``closing`` and
    ``scene_tone`` hints from the persona pack's ``[wording_hints]``.

    :param context: the turn's render context (its ``turn.recent_messages`` hold the group's
        recent messages, the bot's own replies among them).
    :param history: the current user's history as the messages carry it, oldest first (summary
        rows left out).
    :returns: hints, or ``None`` for none.
    """


@hookspec(firstresult=True)
def measure_text(text: str) -> int | None:
    """Measure text for the request budget (``[budget] chars``).

    Runs for the system prompt and for every message of every turn, when the budget is applied:
    in ``render``, and again in ``build_turn_context`` for what is sent (sidecars, memory, notes
    and parts included), also on candidate cuts while it trims. The default measure is the number
    of characters; a plugin can count tokens instead (then set the budget in tokens).

    Stops at first non-None result.

    :param text: the system prompt, one message's content or sidecar, or one of its parts.
    :returns: the length of ``text`` in the budget's unit, or ``None`` to leave it to the next
        plugin (and finally to ``len``).
    """


@hookspec(firstresult=True)
def count_tokens(text: str, config: Config) -> int | None:
    """Count the tokens of ``text`` with a real tokenizer (``docs/cost.md``, "Counting tokens").

    Runs for the texts whose tokens a turn states: the preflight size estimate (the system
    prompt and every message, against ``[turn_context] threshold_tokens``) and the prompt of each
    request sent, for the token and money figures of the trace and the replay. Without an
    implementation every such figure is estimated (:func:`promptweave.text.tokens.estimate_tokens`:
    a CJK character 0.8 tokens, other text four characters a token) and says ``estimated``; a
    figure every text of which a plugin counted says ``counted``. The contrib plugin
    ``tokenize_endpoint`` asks the model server's tokenize endpoint (``[tokens] tokenize_url``).

    Stops at first non-None result.

    :param text: the system prompt, one message's text, or one text of a request's body.
    :param config: the settings in force.
    :returns: the number of tokens, or ``None`` to leave it to the next plugin (and finally to the
        estimate). An implementation that raises or answers anything but a whole number of at
        least 0 is named in the turn's ``plugin_faults`` and the estimate counts that text.
    """


# -------------------------------------------------------------------------
# Per turn: turn context, provider request, submission
# -------------------------------------------------------------------------


@hookspec
def collect_turn_notes(context: RenderContext) -> Sequence[str] | str | None:
    """Contribute must-deliver notes for this turn (a first-time introduction, a voice-channel
    switch, an automatic-reset notice).

    Runs once per turn, in :func:`promptweave.build_turn_context`, after the notes queued on
    ``runtime.conversations.notes`` were taken. Notes ride the current user message (its sidecar,
    or a trailing text part on a multimodal turn), never the system prompt, so the prompt cache
    keeps hitting. They are consumed by this one turn: nothing is replayed later unless the hook
    returns it again. A raising implementation is left out and traced; the others still deliver.

    :param context: the turn's render context.
    :returns: one note, several, or ``None`` for none.
    """


@hookspec(firstresult=True)
def compress_turn_messages(
    messages: Sequence[PromptMessage], pass_number: int, protect_first: int, protect_last: int
) -> Sequence[PromptMessage] | None:
    """Compress a turn's messages for the preflight, one pass.

    Runs when the request's estimate reaches ``turn_context.threshold_tokens``, once per pass (at
    most ``turn_context.max_passes``; passes stop at the first one without progress). A row whose
    content is rewritten must lose its sidecar (:func:`promptweave.turn_context.sidecar.rewrite_content`). The built-in
    implementation (``trylast``) strips earlier images, then drops the oldest unprotected rows,
    then cuts the longest earlier row.

    Stops at first non-None result.

    :param messages: the messages, oldest first, the current user message among them.
    :param pass_number: 1 for the first pass.
    :param protect_first: how many leading rows to keep.
    :param protect_last: how many trailing rows to keep.
    :returns: the compressed messages, or ``None`` to let the next implementation decide.
    """


@hookspec(firstresult=True)
def fetch_image(url: str, limits: ImageLimits) -> FetchedImage | None:
    """Fetch an image a provider needs inline (``provider.inline_images``).

    Runs while a provider request is built, once per distinct image URL; only valid HTTP(S) URLs
    (:func:`promptweave.messages.images.is_vision_url`) are ever fetched. Raising
    :class:`promptweave.ImageFetchError` (or any exception) degrades that image to ``[图片]``; the
    failure is traced in the request. The built-in implementation (``trylast``) reads ``http(s)``
    (and, called directly, ``data:``) URLs within the limits.

    Stops at first non-None result.

    :param url: the image URL.
    :param limits: the largest size, the accepted types and the timeout.
    :returns: the image, or ``None`` to let the next implementation decide.
    """


@hookspec(firstresult=True)
def submit_request(request: ProviderRequest, config: Config) -> SubmitResult | None:
    """Send a provider request and return the reply.

    Runs in :func:`promptweave.submit_request` after the request was built. The built-in
    implementation (``trylast``) sends nothing and returns an offline result, so assembling and
    inspecting turns never needs a network; the ``openai_compat`` contrib plugin sends to an
    OpenAI-compatible server, ``anthropic_messages`` to the Anthropic Messages API.

    Stops at first non-None result.

    :param request: the request: its API, path and exact body.
    :param config: the deployment's settings (``[provider]``).
    :returns: the result, or ``None`` to let the next implementation decide.
    """


@hookspec(firstresult=True)
def submit_request_async(
    request: ProviderRequest, config: Config
) -> Awaitable[SubmitResult] | None:
    """Send a provider request from an event loop: return the coroutine that sends it.

    Runs in :func:`promptweave.asubmit_request` (the live loop's path). An implementation decides
    synchronously: it returns ``None`` at once for a request it does not handle (another format),
    else the not-yet-awaited coroutine, which the caller awaits (a :class:`promptweave.SubmitResult`
    returned directly is accepted too). When every implementation returns ``None``,
    :func:`promptweave.asubmit_request` falls back to ``submit_request`` in a worker thread, so the
    offline default still answers. No built-in implements it; the ``openai_compat`` and
    ``anthropic_messages`` contrib plugins send on ``httpx.AsyncClient``, retrying rate limits,
    server errors, timeouts and broken connections.

    Stops at first non-None result.

    :param request: the request: its API, path and exact body.
    :param config: the deployment's settings (``[provider]``).
    :returns: an awaitable of the result, or ``None`` to let the next implementation decide.
    """


# -------------------------------------------------------------------------
# Per turn: routing
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def decide_with_model(context: RouteContext) -> str | None:
    """Ask a model what to do with the current message.

    Runs once per turn in the ``decide`` stage, only when ``[routing] model_decision = true`` and
    the turn passed the gates and the reply-necessity score, and only when no required tool intent
    already decided it. The answer must be one JSON object in the shape of
    :data:`promptweave.MODEL_ANSWER_FORMAT`; it is validated strictly. An invalid answer
    falls back to the decide rules (reason ``invalid_model_response``), and so does a hook that
    raises (reason ``model_request_failed``). No built-in implements it.

    Stops at first non-None result.

    :param context: the turn's route context: the turn, its signals, the quote candidates, the
        reply-necessity score.
    :returns: the model's raw answer, or ``None`` when this plugin has no model to ask (the decide
        rules then decide).
    """


# -------------------------------------------------------------------------
# Incoming: platform adapters
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def parse_event(platform: str, payload: Any, bot_id: str) -> IncomingEvent | None:
    """Turn a platform's incoming event into a :class:`promptweave.IncomingEvent`: the message,
    its group, the speaker's role, whether it is the bot's own message.

    Runs when the live loop is handed a raw payload (:meth:`promptweave.BotLoop.handle_payload`,
    ``promptweave replay``), and when a bot asks for a platform's message alone
    (:meth:`promptweave.plugins.door.Hooks.parse_message`, which takes the event's ``message``).
    The ``onebot`` contrib plugin handles ``platform="onebot"`` (OneBot v11 ``message`` and
    ``message_sent`` events).

    Stops at first non-None result.

    :param platform: the platform's name, for example ``"onebot"``.
    :param payload: the event as the platform delivered it (a mapping for OneBot).
    :param bot_id: the receiving bot's account id.
    :returns: the event, or ``None`` when this plugin does not handle ``platform``.
    :raises ValueError: the payload is for this plugin's platform but malformed; the loop answers
        it with a ``rejected`` outcome naming the problem.
    """


@hookspec(
    firstresult=True,
    warn_on_impl=DeprecationWarning(
        "the parse_incoming hook is deprecated and goes in the next release: implement "
        "parse_event, whose IncomingEvent carries the message (docs/plugin_hooks.md)"
    ),
)
def parse_incoming(platform: str, payload: Any, bot_id: str) -> ChatMessage | None:
    """Deprecated: implement :func:`parse_event`, one hook for both. A plugin implementing this
    name still works for one release, and is warned at registration.

    Runs after every ``parse_event`` implementation passed, when a bot asks for a platform's
    message (:meth:`promptweave.plugins.door.Hooks.parse_message`).

    Stops at first non-None result.

    :param platform: the platform's name, for example ``"onebot"``.
    :param payload: what the platform delivered.
    :param bot_id: the receiving bot's account id.
    :returns: the message, or ``None`` when this plugin does not handle ``platform``.
    """


@hookspec
def register_tools(register: Callable[[Tool], None]) -> None:
    """Contribute tools the model may call on a ``tool`` turn.

    Runs once at start-up, for every plugin. Call ``register`` once per tool. On a turn the
    routing decides ``tool``, the live loop offers the model the tools whose ``permitted``
    predicate accepts the speaker, runs the calls it makes (at most ``[loop] tool_rounds``
    rounds, each call within ``[loop] tool_timeout_s``), answers a refused or failed call as
    such, and feeds the results back; the results also reach the conversation's next turn in
    section ``tool_context``. No built-in registers a tool; the contrib plugin ``group_tools``
    registers ``roll_dice`` and ``upcoming_events``.

    :param register: ``register(tool)``; raises
        :class:`promptweave.errors.DuplicateRegistrationError` when the name is taken, naming both
        plugins.
    :returns: nothing; the return value is ignored.
    """


@hookspec
def register_learners(register: Callable[[Learner], None]) -> None:
    """Contribute learners: what the bot learns of each group from what it records
    (``docs/learning.md``).

    Runs once at start-up, for every plugin. Call ``register`` once per learner. The learner
    stage runs each learner in the background of the live loop, of a replay and of ``promptweave
    learn``, per (bot, group), over the group-log messages after its cursor; what its ``run``
    returns is stored in the learned store, where the sections read it. A learner that raises or
    hangs keeps its cursor, is retried with backoff and traced, and never affects a turn. The
    built-in plugin ``learners`` registers ``expression_pairs``, ``rhythm``, ``pickups``,
    ``teachings`` and ``negative_feedback``.

    :param register: ``register(learner)``; raises
        :class:`promptweave.errors.DuplicateRegistrationError` when the name is taken, naming both
        plugins.
    :returns: nothing; the return value is ignored.
    """


# -------------------------------------------------------------------------
# After delivery: session compression
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def summarize_session(
    bot_id: str,
    group_id: str | None,
    user_id: str,
    turns: Sequence[SessionTurn],
    previous_summary: str | None,
    max_chars: int,
    model: ModelAsker | None,
) -> str | None:
    """Summarize the older turns of a long session into one short Chinese text.

    Runs in the background after a delivered reply, when the user's session holds
    ``[session] summary_threshold`` user turns and the cooldown has passed; the turns summarized are
    then replaced by one ``【此前对话摘要】`` row. The built-in ``session_summary`` plugin is
    ``trylast`` and works offline: an extractive summary with no LLM call.

    Stops at first non-None result.

    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param user_id: the user whose session it is.
    :param turns: the turns being replaced, oldest first; image placeholders are already described
        (see ``describe_image``) in their ``content``.
    :param previous_summary: the text of the summary these turns follow, if any.
    :param max_chars: the longest summary kept (longer text is cut).
    :param model: the learning model (``[learning.model]``, counted against ``[learning.budget]``
        as learner ``summary``), ``None`` when there is none. The built-in ``model_summary``
        plugin asks it (``docs/learning.md``, summaries); while the budget is spent or the model
        fails, it answers nothing and the extractive summary is written.
    :returns: the summary text, or ``None`` to leave it to the next plugin; a blank result or one
        containing ``【此前对话摘要】`` is rejected and the session is left as it is.
    """


@hookspec(firstresult=True)
def describe_image(
    url: str, bot_id: str, group_id: str | None, model: ModelAsker | None
) -> str | None:
    """Describe an image of the session history, only when a summary needs it.

    Images in history are stored as placeholders with their URL; this runs for each such URL
    that is a valid HTTP(S) URL (:func:`promptweave.messages.images.is_vision_url`; any other entry stays ``[图片]``)
    while a session is being summarized, once per distinct URL of that compression. Never called
    while ``[session] describe_images`` is off (the session then keeps no image URL, and a URL
    stored before is not read). The built-in ``session_summary`` plugin is ``trylast`` and returns
    the placeholder ``[图片]`` unchanged (nothing is downloaded).

    Stops at first non-None result.

    :param url: the image's URL.
    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param model: the learning model (learner ``describe_image`` in ``[learning.budget]``), or
        ``None``; the built-in ``model_summary`` plugin asks it when ``[learning.model] vision`` is
        on.
    :returns: a short description (shown as ``[图片：…]``), ``"[图片]"`` to keep the placeholder,
        or ``None`` to leave it to the next plugin.
    """


# -------------------------------------------------------------------------
# Delivery: reading the answer and sending it
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def read_model_answer(
    text: str, shape: ReplyShape, system_prompt: str, config: Config
) -> ModelAnswer | None:
    """Read the model's raw answer into the bubbles to send, a sticker intent, or silence.

    Runs once per turn that went to the model, after the provider answered and before anything is
    sent. The built-in implementation (``trylast``) applies the contract section ``reply_shape``
    states (:func:`promptweave.read_model_answer_default`, ``docs/delivery.md``): ``PASS`` alone
    is silence; Markdown, code fences, JSON wrappers and stage directions are removed; one bubble a
    line, at most ``shape.max_bubbles``, each at most ``shape.max_chars``; the final ``[表情：…]``
    line is the sticker intent; an answer that repeats the prompt is not sent.

    Stops at first non-None result.

    :param text: the model's answer, as returned.
    :param shape: this turn's reply shape.
    :param system_prompt: the instructions the model saw, for the leak guard.
    :param config: the deployment's settings (``[delivery] sticker``).
    :returns: a :class:`promptweave.ModelAnswer`, or ``None`` to let the next implementation read it.
    """


@hookspec(firstresult=True)
def choose_sticker(
    intent: str, bot_id: str, group_id: str | None, config: Config
) -> Segment | None:
    """Turn the answer's sticker intent (``[表情：笑]`` gives ``"笑"``) into a segment to send.

    Runs once per answer that carries a sticker intent, before its delivery is planned; the
    segment goes out as the turn's last message. The built-in implementation (``trylast``) looks
    the intent up in ``[delivery] faces`` and gives a ``face`` segment; with
    ``[delivery] sticker = "drop"`` it gives nothing.

    Stops at first non-None result.

    :param intent: the sticker intent, as the model wrote it.
    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param config: the deployment's settings (``[delivery]``).
    :returns: a :class:`promptweave.Segment` (a ``face``, or any kind the platform adapter knows),
        or ``None``: the sticker is dropped when no implementation gives one.
    """


@hookspec(firstresult=True)
def send_message(message: OutgoingMessage, transport: Transport) -> Awaitable[SendReceipt] | None:
    """Send one planned message through a platform connection.

    Runs once per message of a delivery plan, in order, after the message's pause. An
    implementation that does not speak ``transport.platform`` returns ``None`` at once (not an
    awaitable that gives ``None``); one that does returns an awaitable (call an ``async def``
    helper and return its coroutine). The built-in implementation (``trylast``) handles
    ``"onebot.v11"``: it calls ``send_group_msg`` or ``send_private_msg`` with the message as a
    segment array and reads the ``message_id`` of the result; a call that raises or gives no id is
    a receipt with ``ok=False``, never an exception.

    Stops at first non-None result.

    :param message: the message: its segments, target and position in the plan.
    :param transport: the connection, with its ``platform`` name and async ``call_api``.
    :returns: an awaitable of a :class:`promptweave.SendReceipt`, or ``None`` when this plugin does
        not handle ``transport.platform``.
    """


@hookspec(firstresult=True)
def fetch_message(
    message_id: str, bot_id: str, group_id: str | None, transport: Transport
) -> Awaitable[ChatMessage | None] | None:
    """Ask the platform for one message by its id: the message a turn replies to, when neither
    the event nor the message store has it, so its images reach the model
    (``docs/messages.md``, the quoted images).

    Runs in the live loop for a turn that speaks, before it is rendered, at most once per
    message id while the loop's cache keeps the answer, bounded by ``[loop]
    quoted_fetch_timeout_s``; a raise or a timeout is traced and the turn goes on without the
    images. An implementation that does not speak ``transport.platform`` returns ``None`` at
    once (not an awaitable that gives ``None``). Contrib ``onebot`` handles ``"onebot.v11"``:
    the ``get_msg`` action, its result parsed like an incoming message.

    Stops at first non-None result.

    :param message_id: the platform's id of the message (OneBot ids may be negative).
    :param bot_id: the bot's account id (its mentions in the message set ``addressed``).
    :param group_id: the group of the turn; ``None`` for a private chat.
    :param transport: the connection, with its ``platform`` name and async ``call_api``.
    :returns: an awaitable of the :class:`promptweave.ChatMessage` (``None`` when the platform
        has no such message), or ``None`` when this plugin does not handle the platform.
    """


# -------------------------------------------------------------------------
# After the fact: observation, off the turn's path
# -------------------------------------------------------------------------


@hookspec
def observe_message_recorded(bot_id: str, group_id: str | None, message: ChatMessage) -> None:
    """Be told that an incoming message was recorded.

    Runs after the recorder stored an incoming message in the group log (the live loop on each
    message's arrival, so ``promptweave replay`` too), once per message stored; a message the
    store did not keep (a private message, which has no group log; the store disabled or failing;
    a repeat) is not observed. It runs on the observation
    worker, never on the turn's path: each implementation is called on its own and waited for
    at most 5 s; one that raises or hangs is logged and traced as a fault of its plugin, and the
    observation is dropped (logged, counted) when the queue is full. The built-in plugins
    implement none.

    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param message: the message as it came in (the group log keeps its text cut at
        ``[session] max_content_chars``).
    :returns: nothing; the return value is ignored.
    """


@hookspec
def observe_reply_delivered(
    bot_id: str,
    group_id: str | None,
    text: str,
    message_id: str | None,
    answering: ChatMessage | None,
    injection: ReplyInjection,
) -> None:
    """Be told that a bot reply was delivered and recorded, with what was injected into it.

    Runs after the live loop sent a reply (or a low-engagement phrase) and the recorder stored
    it, once per message of the reply that reached the group, in order; a message already
    recorded before, or one the store did not keep, is not observed. It runs on the observation
    worker, as :func:`observe_message_recorded` does, never on the turn's path. The built-in
    plugins implement none.

    :param bot_id: the bot's account id.
    :param group_id: the group's id; ``None`` for a private chat.
    :param text: the text of the delivered message.
    :param message_id: the platform's id of the delivered message, when the send gave one.
    :param answering: the message the reply answered.
    :param injection: the sources of the turn the reply was rendered in: each section with the
        hash of its text, and the items each retriever found (none for a phrase).
    :returns: nothing; the return value is ignored.
    """
