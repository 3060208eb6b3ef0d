"""The one door to the hooks: a typed method per hook (``docs/plugin_hooks.md``).

The core calls hooks only through :class:`Hooks` (tox's ``Plugin`` style), never through
``pm.hook``: how each hook is called lives here, in one place: which implementations answer and in
what order, what a fault of each is (isolated, named, traced, bounded by the watchdog), and what
the caller gets back. A hook whose every implementation must be pinned on its plugin is called one
implementation at a time (:class:`HookImplementation`); the others are called as pluggy calls them.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pluggy

from promptweave.errors import ConfigError, PluginRegistrationError, PromptweaveError
from promptweave.plugins.contributions import ModelAsker, SectionOverride
from promptweave.plugins.observers import Observations
from promptweave.plugins.watchdog import (
    NETWORK_BOUND_FACTOR,
    Deadline,
    PluginFault,
    PluginHungError,
    Watchdog,
    call_in,
    call_plugin,
    current_stage,
    cut,
    on_worker,
    record_fault,
    turn_faults,
    type_name,
)

if TYPE_CHECKING:
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
    from promptweave.prompt.render_context import RenderContext
    from promptweave.providers.exchange import ProviderRequest, SubmitResult
    from promptweave.store.session_rows import SessionTurn
    from promptweave.text.tokens import TokenTally
    from promptweave.turn import ChatMessage, HistoryEntry

__all__ = [
    "HINTS_PER_PLUGIN_MAX",
    "NOTES_PER_PLUGIN_MAX",
    "REGISTER_DEADLINE_S",
    "HookImplementation",
    "Hooks",
    "log_failure",
]

log = logging.getLogger("promptweave")

#: The longest one plugin's ``register_*`` hook may take at start-up, by default
#: (``[plugins] register_deadline_s``).
REGISTER_DEADLINE_S = 10.0
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

    @property
    def is_async(self) -> bool:
        """The implementation is an ``async def``: calling it only makes its coroutine."""
        return inspect.iscoroutinefunction(self.impl.function)

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
    """Log a plugin's failure in one line, its error cut at
    :data:`promptweave.plugins.watchdog.DETAIL_MAX_CHARS` (the traceback at debug level), unless
    it is a call skipped because the plugin hung (the hang was logged when it happened)."""
    if isinstance(exc, PluginHungError):
        logger.info("%s", exc)
        return
    # One line, the error's words cut (a plugin's error can quote ten megabytes); the
    # traceback at debug level, for the plugin's author.
    logger.error(f"{message}: %s", *args, cut(f"{type(exc).__name__}: {exc}"))
    logger.debug(message, *args, exc_info=exc)


def _wrong(implementation: HookImplementation, wanted: str, found: object) -> PluginFault:
    """The ``wrong_type`` fault of an implementation's answer (its type named, never its
    value)."""
    return PluginFault(
        plugin=implementation.plugin,
        where=f"hook {implementation.hook_name}",
        kind="wrong_type",
        detail=f"returned {type_name(found)}, expected {wanted}",
    )


@attrs.frozen
class _Contribution:
    """One plugin's contribution hook, called alone: a plugin that does not ship with
    promptweave on a worker thread, for at most ``deadline_s`` (0: unbounded)."""

    plugin: str
    hook_name: str
    caller: Any
    deadline_s: float = REGISTER_DEADLINE_S
    trusted: bool = False

    def __call__(self, **kwargs: Any) -> Any:
        try:
            if self.trusted or self.deadline_s <= 0:
                return self.caller(**kwargs)
            future = on_worker(self.caller, **kwargs)
            concurrent.futures.wait((future,), self.deadline_s)
            if not future.done():
                raise PluginRegistrationError(
                    f"plugin {self.plugin!r} did not finish {self.hook_name} within "
                    f"{self.deadline_s:g} s ([plugins] register_deadline_s): it hangs; start-up "
                    "stopped (block it with PROMPTWEAVE_DISABLE_PLUGINS)"
                )
            return future.result()
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
    #: The longest one plugin's contribution hook may take (``[plugins] register_deadline_s``).
    register_deadline_s: float = REGISTER_DEADLINE_S
    #: Whether a plugin, by name, is called at start-up without a worker thread (those shipped
    #: with promptweave); by default none is.
    trusted: Callable[[str], bool] = attrs.field(default=lambda plugin: False, repr=False)
    _implemented: dict[str, tuple[list[pluggy.HookImpl], list[HookImplementation]]] = attrs.field(
        factory=dict, init=False, repr=False
    )

    # -- how implementations are called ---------------------------------------------------

    def implementations(self, hook_name: str) -> list[HookImplementation]:
        """The implementations of ``hook_name`` in the order pluggy calls them (the last
        registered first, ``tryfirst`` before, ``trylast`` after), hook wrappers left out."""
        caller: pluggy.HookCaller = getattr(self.pm.hook, hook_name)
        impls = caller.get_hookimpls()
        known = self._implemented.get(hook_name)
        # Built once per set of implementations: the live loop asks on every turn.
        if known is not None and known[0] == impls:
            return known[1]
        found = [
            HookImplementation(
                plugin=impl.plugin_name,
                hook_name=hook_name,
                impl=impl,
                pm=self.pm,
                traced=self.traced,
            )
            for impl in reversed(impls)
            if not (impl.hookwrapper or impl.wrapper)
        ]
        self._implemented[hook_name] = (impls, found)
        return found

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
                log_failure(log, exc, "%s of plugin %r raised", where, plugin)
                detail = f"{type(exc).__name__}: {exc}"
                fault = PluginFault(plugin=plugin, where=where, kind="raised", detail=detail)
                record_fault(fault)
                return None, fault
            if found is None:
                continue
            if not isinstance(found, expected):
                names = expected if isinstance(expected, tuple) else (expected,)
                wanted = " or ".join(kind.__name__ for kind in names)
                detail = f"returned {type_name(found)}, expected {wanted} or None"
                fault = PluginFault(plugin=plugin, where=where, kind="wrong_type", detail=detail)
                record_fault(fault)
                return None, fault
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
            yield (
                name,
                _Contribution(
                    name,
                    hook_name,
                    pm.subset_hook_caller(hook_name, others),
                    deadline_s=self.register_deadline_s,
                    trusted=self.trusted(name),
                ),
            )

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
                record_fault(_wrong(implementation, "SectionOverride or None", found))
                return None, problem
            return found, None
        return None, None

    def override_section_possible(self, context: RenderContext) -> bool:
        """Whether any ``override_section`` implementation may answer for ``context``: ``False``
        when none implements the hook, or every implementing plugin defines
        ``has_overrides(context)`` and it returns ``False``. A ``has_overrides`` that raises
        counts as ``True``, so the hook itself reports the problem."""
        run = current_stage()
        for impl in self.pm.hook.override_section.get_hookimpls():
            probe = getattr(impl.plugin, "has_overrides", None)
            if not callable(probe):
                return True
            plugin = impl.plugin_name
            trusted = run is not None and run.trusts(plugin)
            try:
                if call_in(run, trusted, plugin, "has_overrides", probe, context):
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
            except PluginHungError:
                return len(text)  # the hang or the skip is noted already
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
        # With no tokenizer plugin, the tally's own estimate is what count_tokens would answer
        # for every text; a turn's figures are counted with the plugins of the turn's start.
        if self.implemented("count_tokens"):
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
                if isinstance(found, Mapping | bytes):
                    raise TypeError  # its keys or its bytes are not notes
                given = list(itertools.islice(iter(found), NOTES_PER_PLUGIN_MAX))
            except Exception as exc:
                given = [exc]
            wrong = next((note for note in given if not isinstance(note, str)), None)
            if wrong is not None:
                held = "" if isinstance(wrong, TypeError) else f" holding {type_name(wrong)}"
                error = f"returned {type_name(found)}{held}, expected strings"
                log.error("collect_turn_notes of plugin %r %s", plugin, error)
                record_fault(
                    PluginFault(
                        plugin=plugin,
                        where="hook collect_turn_notes",
                        kind="wrong_type",
                        detail=error,
                    )
                )
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

    def submit_request_async(
        self, request: ProviderRequest, config: Config, *, watchdog: Watchdog | None = None
    ) -> Any:
        """``submit_request_async``: an awaitable, or ``None`` when no implementation takes the
        request; what an implementation raises reaches the caller.

        :param watchdog: given, the hook is called one implementation at a time inside the
            awaitable returned (``None`` only when no plugin implements it): each synchronous
            part through :meth:`Watchdog.acall` (never holding the event loop), each awaitable
            for at most ``[provider] timeout_s`` times
            :data:`promptweave.plugins.watchdog.NETWORK_BOUND_FACTOR` (past it
            :class:`PluginHungError` naming the plugin is raised). A synchronous part that hangs
            (or a quarantined plugin) and a wrong answer are passed over, the next
            implementation asked; when none answers, the first of them is given back (the wrong
            answer, or the hang raised). The faults are noted in the live loop's turn. When
            every implementation declines, ``submit_request`` answers, in a worker thread.
        """
        if watchdog is None:
            return self.pm.hook.submit_request_async(request=request, config=config)
        implementations = self.implementations("submit_request_async")
        if not implementations:
            return None
        return self._submit_bounded(implementations, request, config, watchdog)

    async def _submit_bounded(
        self,
        implementations: list[HookImplementation],
        request: ProviderRequest,
        config: Config,
        watchdog: Watchdog,
    ) -> Any:
        from promptweave.providers.exchange import SubmitResult

        collector = turn_faults.get()
        deadline = (
            Deadline(seconds=watchdog.deadline_s) if collector is None else collector.renewed()
        )
        where = "hook submit_request_async"
        # What the first faulty implementation left, given back when no other one answers (the
        # caller's error result then says what went wrong).
        left: Any = None
        hung: PluginHungError | None = None
        for implementation in implementations:
            plugin = implementation.plugin
            try:
                pending = await watchdog.acall(
                    plugin, where, implementation, deadline=deadline, request=request, config=config
                )
            except PluginHungError as exc:
                hung = hung or exc  # hung or quarantined (noted): the next one is asked
                continue
            if pending is None:
                continue
            if inspect.isawaitable(pending):
                seconds = config.provider.timeout_s * NETWORK_BOUND_FACTOR
                pending = await watchdog.awaited(
                    plugin, where, pending, seconds=seconds, deadline=deadline
                )
            if not isinstance(pending, SubmitResult):
                deadline.add(_wrong(implementation, "SubmitResult or None", pending))
                left = pending if left is None else left
                continue  # dropped with its fault: the next implementation is asked
            return pending
        if left is not None:
            return left
        if hung is not None:
            raise hung
        import asyncio  # here: the render command loads no event loop (docs/performance.md)

        return await asyncio.to_thread(self.submit_request_in_full, request, config)

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
                record_fault(_wrong(implementation, "str or None", raw))
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

    async def aparse_event(
        self, platform: str, payload: Any, bot_id: str, *, watchdog: Watchdog, deadline: Deadline
    ) -> IncomingEvent | None:
        """``parse_event`` for the live loop: each implementation on its own, never holding the
        event loop (:meth:`Watchdog.acall`, bounded by ``deadline``). An implementation that
        raises anything but ``ValueError``, hangs or answers something else than an
        :class:`IncomingEvent` is passed over (the fault noted in ``deadline``), and the next one
        is asked.

        :returns: the event, or ``None`` when none parsed the payload.
        :raises ValueError: a plugin found the payload malformed (the documented answer).
        """
        from promptweave.loop.events import IncomingEvent

        where = "hook parse_event"
        for implementation in self.implementations("parse_event"):
            try:
                found = await watchdog.acall(
                    implementation.plugin,
                    where,
                    implementation,
                    deadline=deadline,
                    platform=platform,
                    payload=payload,
                    bot_id=bot_id,
                )
            except ValueError:
                raise
            except Exception:
                continue  # noted in the deadline by the watchdog
            if found is None:
                continue
            if not isinstance(found, IncomingEvent):
                deadline.add(_wrong(implementation, "IncomingEvent or None", found))
                continue
            return found
        return None

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
    ) -> ModelAnswer | None:
        """The first answer of ``read_model_answer``, each implementation called on its own:
        one that raises, hangs or answers anything but a :class:`ModelAnswer` is passed over
        (its fault recorded in the turn's faults) and the next one reads the text, down to the
        built-in reader.

        :returns: the answer, or ``None`` when no implementation gave one.
        """
        from promptweave.delivery.outgoing import ModelAnswer

        answer: ModelAnswer | None = self._first_good(
            "read_model_answer",
            ModelAnswer,
            text=text,
            shape=shape,
            system_prompt=system_prompt,
            config=config,
        )
        return answer

    def choose_sticker(
        self, intent: str, bot_id: str, group_id: str | None, config: Config
    ) -> Segment | None:
        """The first :class:`Segment` of ``choose_sticker``, each implementation on its own: one
        that raises, hangs or answers anything else is passed over (its fault recorded), the
        next one asked; ``None`` when none gives one (the sticker is dropped, not the reply)."""
        from promptweave.delivery.outgoing import Segment

        segment: Segment | None = self._first_good(
            "choose_sticker",
            Segment,
            intent=intent,
            bot_id=bot_id,
            group_id=group_id,
            config=config,
        )
        return segment

    def _first_good(self, hook_name: str, expected: type, **kwargs: Any) -> Any:
        """The first answer of ``expected`` type, each implementation called inside the current
        stage; a fault is recorded and the next implementation asked."""
        where = f"hook {hook_name}"
        for implementation in self.implementations(hook_name):
            try:
                found = call_plugin(implementation.plugin, where, implementation, **kwargs)
            except Exception as exc:
                if not isinstance(exc, PluginHungError):
                    record_fault(
                        PluginFault(
                            plugin=implementation.plugin,
                            where=where,
                            kind="raised",
                            detail=f"{type(exc).__name__}: {exc}",
                        )
                    )
                continue
            if found is None:
                continue
            if not isinstance(found, expected):
                record_fault(_wrong(implementation, f"{expected.__name__} or None", found))
                continue
            return found
        return None

    def send_message(
        self, message: OutgoingMessage, transport: Transport
    ) -> Awaitable[SendReceipt] | None:
        """``send_message`` as pluggy calls it: the pending send, or ``None`` when no plugin
        sends to the transport's platform."""
        pending: Awaitable[SendReceipt] | None = self.pm.hook.send_message(
            message=message, transport=transport
        )
        return pending

    async def asend_message(
        self,
        message: OutgoingMessage,
        transport: Transport,
        *,
        watchdog: Watchdog,
        deadline: Deadline,
    ) -> tuple[str, Awaitable[SendReceipt]] | None:
        """``send_message`` for the live loop: each implementation's synchronous part through
        :meth:`Watchdog.acall` (never holding the event loop); one that raises, hangs or gives
        anything but an awaitable is passed over, its fault noted in ``deadline``.

        :returns: the plugin that took the send and its pending send, or ``None``.
        """
        return await self._pending(
            "send_message", watchdog, deadline, message=message, transport=transport
        )

    async def _pending(
        self, hook_name: str, watchdog: Watchdog, deadline: Deadline, **kwargs: Any
    ) -> tuple[str, Awaitable[Any]] | None:
        """The first awaitable of an async ``hook_name``, its synchronous parts called through
        :meth:`Watchdog.acall`; a raise, a hang or a wrong answer passes over to the next
        implementation (noted in ``deadline``)."""
        where = f"hook {hook_name}"
        for implementation in self.implementations(hook_name):
            try:
                pending = await watchdog.acall(
                    implementation.plugin, where, implementation, deadline=deadline, **kwargs
                )
            except Exception:
                continue  # noted in the deadline by the watchdog
            if pending is None:
                continue
            if not inspect.isawaitable(pending):
                deadline.add(_wrong(implementation, "an awaitable or None", pending))
                continue
            return implementation.plugin, pending
        return None

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

    async def afetch_message(
        self,
        message_id: str,
        bot_id: str,
        group_id: str | None,
        transport: Transport,
        *,
        watchdog: Watchdog,
        deadline: Deadline,
    ) -> tuple[str, Awaitable[ChatMessage | None]] | None:
        """``fetch_message`` for the live loop, as :meth:`asend_message` calls ``send_message``:
        the plugin that took the fetch and its pending fetch, or ``None``."""
        return await self._pending(
            "fetch_message",
            watchdog,
            deadline,
            message_id=message_id,
            bot_id=bot_id,
            group_id=group_id,
            transport=transport,
        )

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
