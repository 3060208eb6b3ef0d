"""The one door to the hooks: a typed method per hook (``docs/plugin_hooks.md``).

The core calls hooks only through :class:`Hooks` (tox's ``Plugin`` style), never through
``pm.hook``: how each hook is called lives here, in one place: which implementations answer and in
what order, what a fault of each is (isolated, named, traced, bounded by the watchdog), and what
the caller gets back. A hook whose every implementation must be pinned on its plugin is called one
implementation at a time (:class:`HookImplementation`); the others are called as pluggy calls them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from promptweave.errors import ConfigError, PluginRegistrationError, PromptweaveError
from promptweave.plugins.contributions import ModelAsker, SectionOverride
from promptweave.plugins.observers import Observations
from promptweave.plugins.watchdog import (
    PluginFault,
    PluginHungError,
    Watchdog,
    call_plugin,
    record_fault,
    type_name,
)

if TYPE_CHECKING:
    from promptweave.config import Config
    from promptweave.decision import RouteContext
    from promptweave.delivery.outgoing import (
        ModelAnswer,
        OutgoingMessage,
        ReplyInjection,
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
    from promptweave.prompt.render_context import RenderContext
    from promptweave.providers.exchange import ProviderRequest, SubmitResult
    from promptweave.store.session_rows import SessionTurn
    from promptweave.text.tokens import TokenTally
    from promptweave.turn import ChatMessage, HistoryEntry

__all__ = [
    "HINTS_PER_PLUGIN_MAX",
    "NOTES_PER_PLUGIN_MAX",
    "HookImplementation",
    "Hooks",
    "log_failure",
]

log = logging.getLogger("promptweave")

#: The most notes one ``collect_turn_notes`` implementation adds to a turn; the rest are not read.
NOTES_PER_PLUGIN_MAX = 32
#: The most hints one ``collect_wording_hints`` implementation adds to a turn; the rest are not
#: read.
HINTS_PER_PLUGIN_MAX = 8


@attrs.frozen
class HookImplementation:
    """One plugin's implementation of a hook, callable alone with the hook's keyword arguments,
    so that a fault is pinned on the plugin that made it.

    :param traced: ``PROMPTWEAVE_TRACE_PLUGINS`` is on: the call goes through a subset hook
        caller of this one plugin, so pluggy's trace writes it as it writes every hook call.
    """

    plugin: str
    hook_name: str
    impl: pluggy.HookImpl
    pm: pluggy.PluginManager
    traced: bool = False

    def __call__(self, **kwargs: Any) -> Any:
        if not self.traced:
            # What pluggy does for one implementation without wrappers: its arguments by name,
            # its answer as it is (firstresult semantics for a single implementation).
            return self.impl.function(*[kwargs[name] for name in self.impl.argnames])
        others = [plugin for plugin in self.pm.get_plugins() if plugin is not self.impl.plugin]
        found = self.pm.subset_hook_caller(self.hook_name, remove_plugins=others)(**kwargs)
        if isinstance(found, list):  # a hook without firstresult answers a list
            return found[0] if found else None
        return found


def log_failure(logger: logging.Logger, exc: BaseException, message: str, *args: Any) -> None:
    """Log a plugin's failure: with its traceback, unless it is a call skipped because the
    plugin hung (the hang was logged when it happened, and skipping has no traceback worth
    reading)."""
    if isinstance(exc, PluginHungError):
        logger.info("%s", exc)
    else:
        logger.error(message, *args, exc_info=exc)


@attrs.frozen
class _Contribution:
    """One plugin's contribution hook, called alone."""

    plugin: str
    hook_name: str
    caller: Any

    def __call__(self, **kwargs: Any) -> Any:
        try:
            return self.caller(**kwargs)
        except PromptweaveError:
            raise
        except Exception as exc:
            raise PluginRegistrationError(
                f"plugin {self.plugin!r} failed in {self.hook_name}: {type(exc).__name__}: {exc}"
            ) from exc


@attrs.define
class Hooks:
    """Every hook the core calls, one typed method each.

    :param pm: the pluggy manager the plugins are registered with.
    :param traced: hook calls are traced (``PROMPTWEAVE_TRACE_PLUGINS=1``).
    :param observations: where the observation hooks are queued and called, off the turn's path.
    """

    pm: pluggy.PluginManager
    traced: bool = False
    observations: Observations = attrs.field(factory=Observations)

    # -- how implementations are called ---------------------------------------------------

    def implementations(self, hook_name: str) -> list[HookImplementation]:
        """The implementations of ``hook_name`` in the order pluggy calls them (the last
        registered first, ``tryfirst`` before, ``trylast`` after), hook wrappers left out."""
        caller: pluggy.HookCaller = getattr(self.pm.hook, hook_name)
        return [
            HookImplementation(
                plugin=impl.plugin_name,
                hook_name=hook_name,
                impl=impl,
                pm=self.pm,
                traced=self.traced,
            )
            for impl in reversed(caller.get_hookimpls())
            if not (impl.hookwrapper or impl.wrapper)
        ]

    def implemented(self, hook_name: str) -> bool:
        """Whether any plugin implements ``hook_name``."""
        caller: pluggy.HookCaller = getattr(self.pm.hook, hook_name)
        return bool(caller.get_hookimpls())

    def _first_answer(
        self,
        hook_name: str,
        expected: type | tuple[type, ...],
        *,
        watchdog: Watchdog | None = None,
        seconds: float | None = None,
        **kwargs: Any,
    ) -> tuple[Any, PluginFault | None]:
        """The first answer of a firstresult hook, each implementation called on its own.

        An implementation that raises, hangs or answers something that is not ``expected`` ends
        the call with its fault (the caller falls back, as if none had answered).

        :param watchdog: bounds each call as a stage of its own (``seconds``: its budget);
            without it, the call is made in the current stage, if any.
        :returns: the answer (``None`` when none), and the fault that stopped the call, if any.
        """
        where = f"hook {hook_name}"
        for implementation in self.implementations(hook_name):
            plugin = implementation.plugin
            try:
                if watchdog is None:
                    found = call_plugin(plugin, where, implementation, **kwargs)
                else:
                    found = watchdog.call(plugin, where, implementation, seconds=seconds, **kwargs)
            except PluginHungError as exc:
                return None, exc.fault
            except Exception as exc:
                log.warning("%s of plugin %r raised", where, plugin, exc_info=True)
                detail = f"{type(exc).__name__}: {exc}"
                return None, PluginFault(plugin=plugin, where=where, kind="raised", detail=detail)
            if found is None:
                continue
            if not isinstance(found, expected):
                names = expected if isinstance(expected, tuple) else (expected,)
                wanted = " or ".join(kind.__name__ for kind in names)
                detail = f"returned {type_name(found)}, expected {wanted} or None"
                return None, PluginFault(
                    plugin=plugin, where=where, kind="wrong_type", detail=detail
                )
            return found, None
        return None, None

    # -- start-up: contributions -----------------------------------------------------------

    def contributions(self, hook_name: str) -> Iterator[tuple[str, Callable[..., Any]]]:
        """``(plugin_name, call)`` for every plugin implementing the contribution hook
        ``hook_name`` (``register_sections``, ``register_retrievers``…), so the registries know
        who gave each item.

        Contributions are collected in registration order (built-ins first), with ``tryfirst``
        implementations before all others and ``trylast`` ones after. Each call goes through a
        subset hook caller, so ``PROMPTWEAVE_TRACE_PLUGINS`` still sees it; what the plugin
        raises reaches the caller as a :class:`promptweave.errors.PluginRegistrationError`
        naming it (the project's own errors, such as a duplicate id, as they are).
        """
        pm = self.pm
        impls = getattr(pm.hook, hook_name).get_hookimpls()  # trylast, registration, tryfirst
        ordered = (
            [impl for impl in impls if impl.tryfirst]
            + [impl for impl in impls if not impl.tryfirst and not impl.trylast]
            + [impl for impl in impls if impl.trylast]
        )
        implementers = [impl.plugin_name for impl in ordered]
        everyone = [(name, plugin) for name, plugin in pm.list_name_plugin() if plugin is not None]
        for name in implementers:
            others = [plugin for other, plugin in everyone if other != name]
            yield name, _Contribution(name, hook_name, pm.subset_hook_caller(hook_name, others))

    def register_sections(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_sections``, each with its call
        (``call(register=...)``), in the order :meth:`contributions` gives."""
        return self.contributions("register_sections")

    def register_retrievers(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_retrievers``, each with its call."""
        return self.contributions("register_retrievers")

    def register_decision_rules(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_decision_rules``, each with its call."""
        return self.contributions("register_decision_rules")

    def register_low_engagement_pools(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_low_engagement_pools``, each with its call."""
        return self.contributions("register_low_engagement_pools")

    def register_persona_packs(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_persona_packs``, each with its call."""
        return self.contributions("register_persona_packs")

    def register_tools(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_tools``, each with its call."""
        return self.contributions("register_tools")

    def register_learners(self) -> Iterator[tuple[str, Callable[..., Any]]]:
        """The plugins that implement ``register_learners``, each with its call."""
        return self.contributions("register_learners")

    # -- assembly ------------------------------------------------------------------------

    def override_section(
        self,
        section_id: str,
        text: str,
        bot_id: str,
        group_id: str,
        context: RenderContext,
        *,
        strict: bool = False,
    ) -> tuple[SectionOverride | None, str | None]:
        """The first override of a section, and the error that kept one from applying: a
        :class:`promptweave.errors.ConfigError` in its own words, any other raise or a wrong
        answer named with its plugin (raised instead when ``strict``)."""
        for implementation in self.implementations("override_section"):
            try:
                found = call_plugin(
                    implementation.plugin,
                    "hook override_section",
                    implementation,
                    section_id=section_id,
                    text=text,
                    bot_id=bot_id,
                    group_id=group_id,
                    context=context,
                )
            except ConfigError as exc:
                return None, str(exc)
            except Exception as exc:
                if strict:
                    raise
                return None, (
                    f"override_section raised {type(exc).__name__}: {exc} "
                    f"(plugin {implementation.plugin!r})"
                )
            if found is None:
                continue
            if not isinstance(found, SectionOverride):
                problem = (
                    f"override_section returned {type_name(found)}, expected SectionOverride "
                    f"or None (plugin {implementation.plugin!r})"
                )
                if strict:
                    raise TypeError(problem)
                return None, problem
            return found, None
        return None, None

    def override_section_possible(self, context: RenderContext) -> bool:
        """Whether any ``override_section`` implementation may answer for ``context``: ``False``
        when none implements the hook, or every implementing plugin defines
        ``has_overrides(context)`` and it returns ``False``. A ``has_overrides`` that raises
        counts as ``True``, so the hook itself reports the problem."""
        for impl in self.pm.hook.override_section.get_hookimpls():
            probe = getattr(impl.plugin, "has_overrides", None)
            if not callable(probe):
                return True
            try:
                if call_plugin(impl.plugin_name, "has_overrides", probe, context):
                    return True
            except Exception:
                return True
        return False

    def measure_text(self, text: str) -> int:
        """The length of ``text`` for the budget: the ``measure_text`` hook, else characters.

        An implementation that raises, hangs or answers anything but a whole number of at least
        0 is passed over (named in the turn's ``plugin_faults``), and characters count instead.
        """
        if not self.pm.hook.measure_text.get_hookimpls():
            return len(text)  # no plugin measures: skip a hook call per message
        where = "hook measure_text"
        for implementation in self.implementations("measure_text"):
            try:
                measured = call_plugin(implementation.plugin, where, implementation, text=text)
            except Exception as exc:
                record_fault(
                    PluginFault(
                        plugin=implementation.plugin,
                        where=where,
                        kind="raised",
                        detail=f"{type(exc).__name__}: {exc}",
                    )
                )
                return len(text)
            if measured is None:
                continue
            if isinstance(measured, bool) or not isinstance(measured, int) or measured < 0:
                record_fault(
                    PluginFault(
                        plugin=implementation.plugin,
                        where=where,
                        kind="wrong_type",
                        detail=f"returned {type_name(measured)} {measured!r:.40}, expected an "
                        "int of at least 0",
                    )
                )
                return len(text)
            return measured
        return len(text)

    def count_tokens(
        self, text: str, config: Config, faults: list[str] | None = None
    ) -> tuple[int, str]:
        """The tokens of ``text`` and how they were found: the ``count_tokens`` hook
        (``counted``), else the estimate (``estimated``, :mod:`promptweave.text.tokens`).

        An implementation that raises or answers anything but a whole number of at least 0 is
        passed over (named in the turn's ``plugin_faults``, and described in ``faults`` when it
        is given), and the estimate counts instead.
        """
        from promptweave.text.tokens import COUNTED, ESTIMATED, estimate_tokens

        if not self.pm.hook.count_tokens.get_hookimpls():
            return estimate_tokens(text), ESTIMATED
        where = "hook count_tokens"
        for implementation in self.implementations("count_tokens"):
            fault = None
            try:
                counted = call_plugin(
                    implementation.plugin, where, implementation, text=text, config=config
                )
            except Exception as exc:
                fault = PluginFault(
                    plugin=implementation.plugin,
                    where=where,
                    kind="raised",
                    detail=f"{type(exc).__name__}: {exc}",
                )
            else:
                if counted is None:
                    continue
                if isinstance(counted, bool) or not isinstance(counted, int) or counted < 0:
                    fault = PluginFault(
                        plugin=implementation.plugin,
                        where=where,
                        kind="wrong_type",
                        detail=f"returned {type_name(counted)} {counted!r:.40}, expected an "
                        "int of at least 0",
                    )
            if fault is not None:
                record_fault(fault)
                if faults is not None and fault.describe() not in faults:
                    faults.append(fault.describe())
                return estimate_tokens(text), ESTIMATED
            return counted, COUNTED
        return estimate_tokens(text), ESTIMATED

    def token_counter(self, config: Config) -> TokenTally:
        """A counter for one turn's figures: each call counts one text (:meth:`count_tokens`);
        its ``basis`` is the least trustworthy of what it counted, its ``faults`` say why a text
        fell back to the estimate."""
        from promptweave.text.tokens import TokenTally

        tally = TokenTally()
        tally.count_one = lambda text: self.count_tokens(text, config, tally.faults)
        return tally

    def collect_wording_hints(
        self, context: RenderContext, history: Sequence[HistoryEntry]
    ) -> tuple[list[WordingHint], list[dict[str, str]]]:
        """Every implementation's wording hints (at most :data:`HINTS_PER_PLUGIN_MAX` of each),
        each with its ``plugin`` filled in; and one ``{"plugin", "error"}`` entry per
        implementation that raised, hung or answered anything but hints (its hints are left
        out, the fault is in the turn's ``plugin_faults`` too)."""
        from promptweave.messages.prompt_message import WordingHint

        where = "hook collect_wording_hints"
        hints: list[WordingHint] = []
        failures: list[dict[str, str]] = []
        for implementation in self.implementations("collect_wording_hints"):
            plugin = implementation.plugin
            try:
                found: Any = call_plugin(
                    plugin, where, implementation, context=context, history=history
                )
            except Exception as exc:
                log_failure(log, exc, "collect_wording_hints of plugin %r raised", plugin)
                detail = f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, PluginHungError):
                    record_fault(
                        PluginFault(plugin=plugin, where=where, kind="raised", detail=detail)
                    )
                failures.append({"plugin": plugin, "error": detail})
                continue
            if found is None:
                continue
            try:
                if isinstance(found, str | bytes | WordingHint):
                    raise TypeError  # one hint alone, or text: not a sequence of hints
                given = list(itertools.islice(iter(found), HINTS_PER_PLUGIN_MAX))
            except Exception:
                given = [found]
            wrong = next((hint for hint in given if not isinstance(hint, WordingHint)), None)
            if wrong is not None:
                error = (
                    f"returned {type_name(found)} holding {type_name(wrong)}, "
                    "expected WordingHint records"
                )
                log.error("collect_wording_hints of plugin %r %s", plugin, error)
                record_fault(
                    PluginFault(plugin=plugin, where=where, kind="wrong_type", detail=error)
                )
                failures.append({"plugin": plugin, "error": error})
                continue
            hints.extend(attrs.evolve(hint, plugin=plugin) for hint in given)
        return hints, failures

    # -- turn context, provider request, submission ----------------------------------------

    def collect_turn_notes(self, context: RenderContext) -> tuple[list[str], list[dict[str, str]]]:
        """Every implementation's notes (at most :data:`NOTES_PER_PLUGIN_MAX` of each), and one
        ``{"plugin", "error"}`` entry per implementation that raised, hung or answered anything
        but strings."""
        notes: list[str] = []
        failures: list[dict[str, str]] = []
        for implementation in self.implementations("collect_turn_notes"):
            plugin = implementation.plugin
            try:
                found: Any = call_plugin(
                    plugin, "hook collect_turn_notes", implementation, context=context
                )
            except Exception as exc:
                log_failure(log, exc, "collect_turn_notes of plugin %r raised", plugin)
                failures.append({"plugin": plugin, "error": f"{type(exc).__name__}: {exc}"})
                continue
            if found is None:
                continue
            if isinstance(found, str):
                found = [found]
            try:
                given = list(itertools.islice(iter(found), NOTES_PER_PLUGIN_MAX))
            except Exception as exc:
                given = [exc]
            wrong = next((note for note in given if not isinstance(note, str)), None)
            if wrong is not None:
                error = f"returned {type_name(found)} holding {type_name(wrong)}, expected strings"
                log.error("collect_turn_notes of plugin %r %s", plugin, error)
                failures.append({"plugin": plugin, "error": error})
                continue
            notes.extend(given)
        return notes, failures

    def compress_turn_messages(
        self,
        messages: tuple[PromptMessage, ...],
        pass_number: int,
        protect_first: int,
        protect_last: int,
    ) -> Sequence[PromptMessage] | None:
        """The first ``compress_turn_messages`` answer: ``None`` when no plugin answers, or when
        one raises, hangs or answers anything but a list of messages (the fault is recorded in
        the turn's trace)."""
        from promptweave.messages.prompt_message import PromptMessage

        where = "hook compress_turn_messages"
        for implementation in self.implementations("compress_turn_messages"):
            plugin = implementation.plugin
            try:
                found = call_plugin(
                    plugin,
                    where,
                    implementation,
                    messages=messages,
                    pass_number=pass_number,
                    protect_first=protect_first,
                    protect_last=protect_last,
                )
            except Exception as exc:
                log_failure(log, exc, "compress_turn_messages of plugin %r raised", plugin)
                detail = f"{type(exc).__name__}: {exc}"
                record_fault(PluginFault(plugin=plugin, where=where, kind="raised", detail=detail))
                return None
            if found is None:
                continue
            if (
                isinstance(found, Sequence)
                and not isinstance(found, str | bytes)
                and all(isinstance(row, PromptMessage) for row in found)
            ):
                return found
            detail = f"returned {type_name(found)}, expected a sequence of PromptMessage"
            record_fault(PluginFault(plugin=plugin, where=where, kind="wrong_type", detail=detail))
            return None
        return None

    def fetch_image(
        self, url: str, limits: ImageLimits, *, watchdog: Watchdog, seconds: float
    ) -> tuple[FetchedImage | None, PluginFault | None]:
        """The first image fetched for ``url``, each implementation bounded by ``seconds``; and
        the fault that stopped the call."""
        from promptweave.messages.prompt_message import FetchedImage

        return self._first_answer(
            "fetch_image", FetchedImage, watchdog=watchdog, seconds=seconds, url=url, limits=limits
        )

    def submit_request(
        self, request: ProviderRequest, config: Config, *, watchdog: Watchdog, seconds: float
    ) -> tuple[SubmitResult | None, PluginFault | None]:
        """The first result of ``submit_request``, each implementation bounded by ``seconds``;
        and the fault that stopped the call."""
        from promptweave.providers.exchange import SubmitResult

        return self._first_answer(
            "submit_request",
            SubmitResult,
            watchdog=watchdog,
            seconds=seconds,
            request=request,
            config=config,
        )

    def submit_request_in_full(self, request: ProviderRequest, config: Config) -> Any:
        """``submit_request`` as pluggy calls it (what any implementation raises reaches the
        caller), for the synchronous fallback of ``submit_request_async``."""
        return self.pm.hook.submit_request(request=request, config=config)

    def submit_request_async(self, request: ProviderRequest, config: Config) -> Any:
        """``submit_request_async`` as pluggy calls it: an awaitable, or ``None`` when no
        implementation takes the request; what an implementation raises reaches the caller."""
        return self.pm.hook.submit_request_async(request=request, config=config)

    # -- routing -----------------------------------------------------------------------------

    def decide_with_model(self, context: RouteContext) -> str | None:
        """The first answer of a ``decide_with_model`` implementation, each called on its own
        so that a hang or an error names its plugin.

        :raises TypeError: an implementation answered something other than a string.
        """
        for implementation in self.implementations("decide_with_model"):
            raw = call_plugin(
                implementation.plugin, "hook decide_with_model", implementation, context=context
            )
            if raw is None:
                continue
            if not isinstance(raw, str):
                raise TypeError(
                    f"decide_with_model of plugin {implementation.plugin!r} returned "
                    f"{type(raw).__name__}, expected str or None"
                )
            return raw
        return None

    # -- incoming ----------------------------------------------------------------------------

    def parse_event(self, platform: str, payload: Any, bot_id: str) -> IncomingEvent | None:
        """``parse_event`` as pluggy calls it (the live loop and the replay judge its answer):
        the event, or ``None`` when no plugin handles ``platform``; what an implementation
        raises reaches the caller."""
        answer: IncomingEvent | None = self.pm.hook.parse_event(
            platform=platform, payload=payload, bot_id=bot_id
        )
        return answer

    def parse_message(
        self, platform: str, payload: Any, bot_id: str, *, watchdog: Watchdog | None = None
    ) -> ChatMessage:
        """The message of a platform's payload: the ``parse_event`` hook's event's message, each
        implementation on its own (bounded by the ``watchdog``'s turn deadline); then the
        implementations of the deprecated ``parse_incoming``.

        :raises ValueError: no loaded plugin handles ``platform``, or the payload is not a valid
            message (the plugin's own ``ValueError``); or the plugin failed otherwise: raised
            another error, answered something else, or took longer than the turn's deadline
            (the message names the plugin).
        """
        from promptweave.loop.events import IncomingEvent
        from promptweave.turn import ChatMessage

        for hook_name, expected in (
            ("parse_event", IncomingEvent),
            ("parse_incoming", ChatMessage),
        ):
            for implementation in self.implementations(hook_name):
                plugin = implementation.plugin
                where = f"hook {hook_name}"
                try:
                    if watchdog is None:
                        found = call_plugin(
                            plugin,
                            where,
                            implementation,
                            platform=platform,
                            payload=payload,
                            bot_id=bot_id,
                        )
                    else:
                        found = watchdog.call(
                            plugin,
                            where,
                            implementation,
                            platform=platform,
                            payload=payload,
                            bot_id=bot_id,
                        )
                except ValueError:
                    raise  # the documented answer to a payload that is not a message
                except Exception as exc:
                    raise ValueError(
                        f"plugin {plugin!r} could not parse a {platform!r} message: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                if found is None:
                    continue
                if not isinstance(found, expected):
                    raise ValueError(
                        f"plugin {plugin!r} parsed a {platform!r} message into "
                        f"{type_name(found)}, not {'an' if hook_name == 'parse_event' else 'a'} "
                        f"{expected.__name__}"
                    )
                message: ChatMessage = found.message if isinstance(found, IncomingEvent) else found
                return message
        raise ValueError(
            f"no plugin parses messages of platform {platform!r}; "
            "enable one (contrib plugin 'onebot' handles 'onebot')"
        )

    # -- after delivery: session compression -------------------------------------------------

    def summarize_session(
        self,
        *,
        bot_id: str,
        group_id: str | None,
        user_id: str,
        turns: tuple[SessionTurn, ...],
        previous_summary: str | None,
        max_chars: int,
        watchdog: Watchdog | None,
        seconds: float | None,
        model: ModelAsker | None = None,
    ) -> tuple[str | None, PluginFault | None]:
        """The first summary, each implementation bounded by ``seconds``; and the fault that
        stopped the call."""
        return self._first_answer(
            "summarize_session",
            str,
            watchdog=watchdog,
            seconds=seconds,
            bot_id=bot_id,
            group_id=group_id,
            user_id=user_id,
            turns=turns,
            previous_summary=previous_summary,
            max_chars=max_chars,
            model=model,
        )

    def describe_image(
        self,
        url: str,
        bot_id: str,
        group_id: str | None,
        *,
        watchdog: Watchdog | None,
        seconds: float | None,
        model: ModelAsker | None = None,
    ) -> tuple[str | None, PluginFault | None]:
        """The first description of an image, each implementation bounded by ``seconds``; and
        the fault that stopped the call."""
        return self._first_answer(
            "describe_image",
            str,
            watchdog=watchdog,
            seconds=seconds,
            url=url,
            bot_id=bot_id,
            group_id=group_id,
            model=model,
        )

    # -- delivery: reading the answer and sending it -----------------------------------------

    def read_model_answer(
        self, text: str, shape: ReplyShape, system_prompt: str, config: Config
    ) -> ModelAnswer | Any:
        """``read_model_answer`` as pluggy calls it; the live loop judges the answer, and what an
        implementation raises reaches it."""
        return self.pm.hook.read_model_answer(
            text=text, shape=shape, system_prompt=system_prompt, config=config
        )

    def choose_sticker(self, intent: str, bot_id: str, group_id: str | None, config: Config) -> Any:
        """``choose_sticker`` as pluggy calls it: the sticker's segment, or ``None``."""
        return self.pm.hook.choose_sticker(
            intent=intent, bot_id=bot_id, group_id=group_id, config=config
        )

    def send_message(
        self, message: OutgoingMessage, transport: Transport
    ) -> Awaitable[SendReceipt] | None:
        """``send_message`` as pluggy calls it: the pending send, or ``None`` when no plugin
        sends to the transport's platform."""
        pending: Awaitable[SendReceipt] | None = self.pm.hook.send_message(
            message=message, transport=transport
        )
        return pending

    def fetch_message(
        self, message_id: str, bot_id: str, group_id: str | None, transport: Transport
    ) -> Awaitable[ChatMessage | None] | None:
        """``fetch_message`` as pluggy calls it: the pending fetch, or ``None`` when no plugin
        fetches from the transport's platform. The caller bounds the wait (the live loop:
        ``[loop] quoted_fetch_timeout_s``)."""
        pending: Awaitable[ChatMessage | None] | None = self.pm.hook.fetch_message(
            message_id=message_id, bot_id=bot_id, group_id=group_id, transport=transport
        )
        return pending

    # -- after the fact: observation -------------------------------------------------------

    def _observe(self, hook_name: str, **kwargs: Any) -> bool:
        """Queue ``hook_name``'s implementations for the observation worker: each is called on
        its own, bounded, a raise or a hang logged and traced as a fault of its plugin; what it
        returns is ignored. Never blocks and never raises.

        :returns: whether the observation was queued (``False`` when no plugin observes it or
            the queue is full).
        """
        implementations = self.implementations(hook_name)
        calls = [(implementation.plugin, implementation) for implementation in implementations]
        return self.observations.submit(hook_name, calls, **kwargs)

    def observe_message_recorded(
        self, bot_id: str, group_id: str | None, message: ChatMessage
    ) -> bool:
        """Tell the observers a message was recorded, off the caller's path (:meth:`_observe`)."""
        return self._observe(
            "observe_message_recorded", bot_id=bot_id, group_id=group_id, message=message
        )

    def observe_reply_delivered(
        self,
        bot_id: str,
        group_id: str | None,
        text: str,
        message_id: str | None,
        answering: ChatMessage | None,
        injection: ReplyInjection,
    ) -> bool:
        """Tell the observers a reply was delivered and recorded, off the caller's path
        (:meth:`_observe`)."""
        return self._observe(
            "observe_reply_delivered",
            bot_id=bot_id,
            group_id=group_id,
            text=text,
            message_id=message_id,
            answering=answering,
            injection=injection,
        )
