"""Calling a hook one implementation at a time, so that a fault names its plugin
(``docs/plugin_hooks.md``, "When a plugin misbehaves")."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pluggy

from promptweave.plugins.watchdog import (
    PluginFault,
    PluginHungError,
    Watchdog,
    call_plugin,
    type_name,
)

__all__ = ["HookImplementation", "first_answer", "implementations", "log_failure"]

log = logging.getLogger("promptweave")


@attrs.frozen
class HookImplementation:
    """One plugin's implementation of a hook, callable alone with the hook's keyword arguments,
    so that a fault is pinned on the plugin that made it (hook tracing still sees the call)."""

    plugin: str
    hook: pluggy.HookCaller
    impl: pluggy.HookImpl

    def __call__(self, **kwargs: Any) -> Any:
        # The hook's own executor (what pluggy's subset callers use): tracing and monitoring see
        # the call, and firstresult semantics hold for the one implementation.
        return self.hook._hookexec(self.hook.name, [self.impl], kwargs, True)


def implementations(hook: pluggy.HookCaller) -> list[HookImplementation]:
    """The implementations of ``hook`` in the order pluggy calls them (the last registered
    first, ``tryfirst`` before, ``trylast`` after), hook wrappers left out."""
    return [
        HookImplementation(plugin=impl.plugin_name, hook=hook, impl=impl)
        for impl in reversed(hook.get_hookimpls())
        if not (impl.hookwrapper or impl.wrapper)
    ]


def first_answer(
    hook: pluggy.HookCaller,
    where: str,
    expected: type | tuple[type, ...],
    *,
    watchdog: Watchdog | None = None,
    seconds: float | None = None,
    **kwargs: Any,
) -> tuple[Any, PluginFault | None]:
    """The first answer of a firstresult ``hook``, each implementation called on its own.

    An implementation that raises, hangs or answers something that is not ``expected`` ends the
    call with its fault (the caller falls back, as if none had answered).

    :param watchdog: bounds each call as a stage of its own (``seconds``: its budget); without
        it, the call is made in the current stage, if any.
    :returns: the answer (``None`` when none), and the fault that stopped the call, if any.
    """
    for implementation in implementations(hook):
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
            return None, PluginFault(plugin=plugin, where=where, kind="wrong_type", detail=detail)
        return found, None
    return None, None


def log_failure(logger: logging.Logger, exc: BaseException, message: str, *args: Any) -> None:
    """Log a plugin's failure: with its traceback, unless it is a call skipped because the
    plugin hung (the hang was logged when it happened, and skipping has no traceback worth
    reading)."""
    if isinstance(exc, PluginHungError):
        logger.info("%s", exc)
    else:
        logger.error(message, *args, exc_info=exc)
