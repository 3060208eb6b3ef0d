"""Build the plugin manager: a factory with a documented load order (``docs/plugin_loading.md``).

Load order:

1. the block list, from ``PROMPTWEAVE_DISABLE_PLUGINS`` and the ``disabled`` argument;
2. the built-in plugins, :data:`DEFAULT_PLUGINS`, registered like any other plugin;
3. the requested ``contrib`` plugins, by name;
4. plugins from the ``promptweave`` entry-point group, unless
   ``PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD`` is set; ``PROMPTWEAVE_LOAD_PLUGINS`` is an allowlist of
   distributions (``''`` loads none);
5. programmatic extras;
6. ``check_pending()``, so an implementation of a hook that does not exist fails at start-up.

What a scan of the installed distributions finds (the ``promptweave`` entry points and the
version of promptweave itself) is kept in a small cache file between runs, valid while the
import path and the metadata directories on it are unchanged (``docs/performance.md``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import logging
import os
import pkgutil
import re
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

import attrs
import pluggy

from promptweave._cache_dir import ENV_CACHE_DIR, cache_directory
from promptweave._patterns import lazy_pattern
from promptweave.errors import PluginImportError, PluginValidationError
from promptweave.plugins import hookspecs
from promptweave.plugins.door import Hooks

__all__ = [
    "CONTRIB_PACKAGE",
    "DEFAULT_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "PluginManager",
    "available_contrib_plugins",
    "build_plugin_manager",
    "cache_directory",
]

ENTRY_POINT_GROUP = "promptweave"
CONTRIB_PACKAGE = "promptweave.contrib"
#: Modules of ``contrib`` that are not plugins: the example packages, and the Redis store, which
#: ``[store] backend = "redis"`` selects.
CONTRIB_NOT_PLUGINS = frozenset({"examples", "redis_store"})

#: The built-in plugins, by dotted module name; each registers under its last name component.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "promptweave.builtin_plugins.persona_packs",
    "promptweave.builtin_plugins.static_sections",
    "promptweave.builtin_plugins.profile_sections",
    "promptweave.builtin_plugins.retrieval_sections",
    "promptweave.builtin_plugins.retrievers",
    "promptweave.builtin_plugins.learners",
    "promptweave.builtin_plugins.strategy_learner",
    "promptweave.builtin_plugins.member_learner",
    "promptweave.builtin_plugins.event_learner",
    "promptweave.builtin_plugins.turn_sections",
    "promptweave.builtin_plugins.wording_hints",
    "promptweave.builtin_plugins.overrides_file",
    "promptweave.builtin_plugins.request_defaults",
    "promptweave.builtin_plugins.routing_rules",
    "promptweave.builtin_plugins.phrase_pools",
    "promptweave.builtin_plugins.session_summary",
    "promptweave.builtin_plugins.model_summary",
    "promptweave.builtin_plugins.delivery",
)

log = logging.getLogger("promptweave.plugins")

ENV_LOAD = "PROMPTWEAVE_LOAD_PLUGINS"
ENV_DISABLE = "PROMPTWEAVE_DISABLE_PLUGINS"
ENV_NO_AUTOLOAD = "PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD"
ENV_TRACE = "PROMPTWEAVE_TRACE_PLUGINS"

#: Bumped when the cache file's content changes meaning, so an old file is never misread.
_CACHE_FORMAT = 1
#: How many scans the cache file keeps (the newest): one per interpreter and import path in use.
_CACHE_SCANS = 32
#: The finders whose distributions are directories and files on ``sys.path``: the only ones the
#: cache can tell have changed. Any other finder with ``find_distributions`` turns the cache off.
_PATH_FINDERS = frozenset(
    {
        "importlib.machinery.PathFinder",
        "_frozen_importlib_external.PathFinder",
        "importlib.metadata.MetadataPathFinder",
        "importlib_metadata.MetadataPathFinder",
    }
)
#: ``module``, ``module:attribute`` or ``module:object.attribute``, then optional extras: the
#: entry-point syntax, as importlib_metadata parses it.
_ENTRY_POINT_VALUE = lazy_pattern(
    r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"
)


@attrs.frozen(kw_only=True)
class PluginInfo:
    """What ``promptweave plugins`` shows of one plugin.

    :param kind: ``builtin``, ``contrib``, ``external`` (entry point) or ``extra`` (programmatic).
    """

    name: str
    kind: str
    distribution: str | None
    version: str | None


_MISSING = object()


def _module_function(plugin: object, name: str) -> object:
    """``plugin``'s function ``name`` when ``plugin`` is a plain module and ``name`` a plain
    function of its namespace, ``None`` when it is something else of that namespace that holds
    no hook (a class, a constant), :data:`_MISSING` when only pluggy can tell."""
    if type(plugin) is not ModuleType or hasattr(ModuleType, name):
        return _MISSING  # a module's special names can be descriptors of its type
    value = vars(plugin).get(name, _MISSING)
    if isinstance(value, staticmethod | classmethod | MethodType):
        return _MISSING
    return value if value is _MISSING or isinstance(value, FunctionType) else None


def _marker(function: object, attribute: str) -> Any:
    """The options a hook marker left on ``function`` (pluggy's own rule)."""
    for holder in (function, getattr(function, "__func__", None)):
        options = getattr(holder, attribute, None)
        if options is not None:
            return options if isinstance(options, dict) else None
    return None


class _PluggyManager(pluggy.PluginManager):
    """pluggy's manager, finding a module plugin's hooks in the module's namespace.

    pluggy looks every name of a plugin up with :func:`inspect.getattr_static`, which walks the
    type's attributes each time: the built-in plugins' 900 names took 25 ms of each start. For a
    function of a plain module the lookup gives the namespace's value, read here directly; any
    other name goes to pluggy.
    """

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        function = _module_function(plugin, name)
        if function is _MISSING:
            return super().parse_hookimpl_opts(plugin, name)
        return None if function is None else _marker(function, self.project_name + "_impl")

    def parse_hookspec_opts(self, module_or_class: Any, name: str) -> Any:
        function = _module_function(module_or_class, name)
        if function is _MISSING:
            return super().parse_hookspec_opts(module_or_class, name)
        return None if function is None else _marker(function, self.project_name + "_spec")


@attrs.define
class PluginManager:
    """The pluggy manager plus what is known of each plugin's origin, and :attr:`hooks`, the
    door through which the core calls every hook.

    :param traced: hook calls are traced (``PROMPTWEAVE_TRACE_PLUGINS=1``).
    """

    pm: pluggy.PluginManager
    infos: dict[str, PluginInfo] = attrs.field(factory=dict)
    traced: bool = False
    hooks: Hooks = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.hooks = Hooks(pm=self.pm, traced=self.traced)

    def hook_names(self) -> list[str]:
        """The names of every hook plugins can implement, sorted."""
        return sorted(
            name
            for name, caller in vars(self.pm.hook).items()
            if isinstance(caller, pluggy.HookCaller) and caller.spec is not None
        )

    def hooks_of(self, name: str) -> list[str]:
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return []
        return sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])


def _names(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _normalize(distribution: str) -> str:
    """A distribution name as packaging compares it: case-insensitive, ``-_.`` alike."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no")


@attrs.frozen(kw_only=True)
class _Distribution:
    """The distribution an entry point comes from, as the plugin infos and errors name it."""

    name: str
    version: str | None


@attrs.frozen(kw_only=True)
class _EntryPoint:
    """An entry point read from the discovery cache; :meth:`load` resolves it the way
    ``importlib_metadata.EntryPoint.load`` does, without importing importlib_metadata."""

    name: str
    value: str
    dist: _Distribution | None

    def load(self) -> object:
        match = _ENTRY_POINT_VALUE.match(self.value)
        if match is None:
            raise ValueError(
                "Invalid object reference. See https://packaging.python.org"
                "/en/latest/specifications/entry-points/#data-model",
                self.value,
            )
        module = importlib.import_module(match.group("module"))
        names = filter(None, (match.group("attr") or "").split("."))
        return functools.reduce(getattr, names, module)


@attrs.frozen(kw_only=True)
class _Installed:
    """What the installed distributions say: promptweave's own version and the entry points of
    the ``promptweave`` group, in importlib_metadata's order."""

    own_version: str | None
    entry_points: tuple[Any, ...]


def _scan_installed() -> _Installed:
    """Ask importlib_metadata, which parses the metadata of every installed distribution."""
    import importlib_metadata

    try:
        own_version: str | None = importlib_metadata.version("promptweave")
    except importlib_metadata.PackageNotFoundError:
        own_version = None
    return _Installed(
        own_version=own_version,
        entry_points=tuple(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP)),
    )


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _path_signature(paths: Sequence[str]) -> list[object] | None:
    """What the distributions on ``paths`` depend on: for a file (a zip archive), its
    modification time and size; in a directory, the name and modification time of every metadata
    directory (one is added or removed with each distribution installed or removed) and of its
    ``entry_points.txt`` (edited in place by hand or by an editable install). Other files in the
    directories do not count: a script's directory changes all the time. ``None`` when a finder
    that does not look at ``paths`` could contribute distributions."""
    for finder in sys.meta_path:
        if getattr(finder, "find_distributions", None) is None:
            continue
        kind = finder if isinstance(finder, type) else type(finder)
        if f"{kind.__module__}.{kind.__qualname__}" not in _PATH_FINDERS:
            return None
    signature: list[object] = [_CACHE_FORMAT, sys.executable, sys.version]
    for entry in paths:
        path = os.path.abspath(entry or ".")
        try:
            entry_stat = os.stat(path)
        except OSError:
            signature.append([path, None])
            continue
        if not stat.S_ISDIR(entry_stat.st_mode):
            signature.append([path, entry_stat.st_mtime_ns, entry_stat.st_size])
            continue
        metadata = []
        try:
            with os.scandir(path) as children:
                for child in children:
                    if child.name.endswith((".dist-info", ".egg-info")) or child.name == "EGG-INFO":
                        points = os.path.join(child.path, "entry_points.txt")
                        metadata.append([child.name, _mtime(child.path), _mtime(points)])
        except OSError:
            return None
        signature.append([path, sorted(metadata)])
    return signature


def _cache_file(env: Mapping[str, str]) -> Path | None:
    """The discovery cache file, or ``None`` if caching is off. An ``environ`` given to the
    runtime that does not say where the cache is leaves it where the process keeps it."""
    directory = cache_directory(env if ENV_CACHE_DIR in env else {**os.environ, **env})
    return None if directory is None else directory / "plugins.json"


def _read_cache(file: Path) -> dict[str, Any]:
    """The cached scans by key; empty if the file is missing or damaged."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    scans = data.get("scans") if isinstance(data, dict) else None
    return scans if isinstance(scans, dict) else {}


def _cached(scans: Mapping[str, Any], key: str) -> _Installed | None:
    try:
        scan = scans[key]
        return _Installed(
            own_version=scan["own_version"],
            entry_points=tuple(
                _EntryPoint(
                    name=name,
                    value=value,
                    dist=None
                    if dist_name is None
                    else _Distribution(name=dist_name, version=dist_version),
                )
                for name, value, dist_name, dist_version in scan["entry_points"]
            ),
        )
    except (KeyError, ValueError, TypeError):
        return None


def _write_cache(file: Path, scans: dict[str, Any], key: str, installed: _Installed) -> None:
    """Add the scan under ``key``, keeping the :data:`_CACHE_SCANS` newest (one per environment
    and import path in use, and the scans before an installation until they are pushed out)."""
    entry_points = []
    for entry_point in installed.entry_points:
        dist = entry_point.dist
        entry_points.append(
            [
                entry_point.name,
                entry_point.value,
                None if dist is None else dist.name,
                None if dist is None else dist.version,
            ]
        )
    scans.pop(key, None)
    scans[key] = {"own_version": installed.own_version, "entry_points": entry_points}
    kept = dict(list(scans.items())[-_CACHE_SCANS:])
    temporary = file.with_name(f"{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary.write_text(json.dumps({"scans": kept}), encoding="utf-8")
        # Atomic: a process starting meanwhile reads the old file or the new one, never half.
        os.replace(temporary, file)
    except OSError:
        # A read-only or full disk costs the scan next time, nothing else.
        temporary.unlink(missing_ok=True)


def _installed_plugins(env: Mapping[str, str]) -> _Installed:
    """The installed plugins and promptweave's version: from the cache file when the import path
    and its metadata directories are as they were when it was written, else scanned (and the
    cache rewritten)."""
    file = _cache_file(env)
    signature = None if file is None else _path_signature(sys.path)
    if file is None or signature is None:
        return _scan_installed()
    key = hashlib.sha256(json.dumps(signature).encode()).hexdigest()
    scans = _read_cache(file)
    cached = _cached(scans, key)
    if cached is not None:
        return cached
    installed = _scan_installed()
    _write_cache(file, scans, key, installed)
    return installed


#: The extra of the ``promptweave`` distribution each contrib plugin needs, named in the error
#: when a module it imports is missing.
CONTRIB_EXTRAS = {
    "openai_compat": "openai",
    "anthropic_messages": "anthropic",
    "nonebot": "nonebot",
}


def _import(dotted: str, plugin_name: str, distribution: str, version: str | None) -> ModuleType:
    try:
        return importlib.import_module(dotted)
    except Exception as exc:
        extra = CONTRIB_EXTRAS.get(plugin_name) if distribution == "promptweave" else None
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and extra is not None:
            hint = f"; install it with pip install 'promptweave[{extra}]'"
        raise PluginImportError(
            f'Error importing plugin "{plugin_name}" ({dotted}) from distribution '
            f"{distribution} {version or '(version unknown)'}: {type(exc).__name__}: {exc}{hint}"
        ) from exc


def available_contrib_plugins() -> list[str]:
    """Names of the plugins in ``contrib`` that can be enabled."""
    package = importlib.import_module(CONTRIB_PACKAGE)
    return sorted(
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_") and info.name not in CONTRIB_NOT_PLUGINS
    )


def build_plugin_manager(
    *,
    contrib: Iterable[str] = (),
    extra_plugins: Iterable[object] = (),
    disabled: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> PluginManager:
    """Create a plugin manager with every plugin loaded in the documented order.

    :param contrib: names of ``contrib`` plugins to load (see :func:`available_contrib_plugins`).
    :param extra_plugins: plugin objects (modules, classes, instances) registered last.
    :param disabled: plugin names to block, in addition to ``PROMPTWEAVE_DISABLE_PLUGINS``.
    :param environ: the environment to read; ``os.environ`` by default.
    :raises PluginImportError: a plugin could not be imported.
    :raises pluggy.PluginValidationError: a plugin implements a hook that does not exist.
    """
    env = os.environ if environ is None else environ
    pm = _PluggyManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    traced = _truthy(env.get(ENV_TRACE))
    manager = PluginManager(pm=pm, traced=traced)
    if traced:
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()

    for name in [*_names(env.get(ENV_DISABLE)), *disabled]:
        pm.set_blocked(name)

    installed = _installed_plugins(env)
    own_version = installed.own_version
    for dotted in DEFAULT_PLUGINS:
        name = dotted.rsplit(".", 1)[-1]
        if pm.is_blocked(name):
            continue
        module = _import(dotted, name, "promptweave", own_version)
        pm.register(module, name=name)
        manager.infos[name] = PluginInfo(
            name=name, kind="builtin", distribution="promptweave", version=own_version
        )

    known_contrib = available_contrib_plugins()
    # A name asked for twice (in the config and by the caller) is one plugin.
    for name in dict.fromkeys(contrib):
        if name not in known_contrib:
            raise PluginImportError(
                f"unknown contrib plugin {name!r}; available: {', '.join(known_contrib) or 'none'}"
            )
        if pm.is_blocked(name):
            continue
        module = _import(f"{CONTRIB_PACKAGE}.{name}", name, "promptweave", own_version)
        pm.register(module, name=name)
        manager.infos[name] = PluginInfo(
            name=name, kind="contrib", distribution="promptweave", version=own_version
        )

    if not _truthy(env.get(ENV_NO_AUTOLOAD)):
        _load_entry_points(manager, installed.entry_points, env.get(ENV_LOAD))

    extra_names = []
    for plugin in extra_plugins:
        extra_names.append(pm.get_canonical_name(plugin))
        _register_extra(manager, plugin)

    _check_env_names(manager, installed.entry_points, env, extra_names)

    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) or repr(exc.plugin)
        info = manager.infos.get(name)
        origin = (
            f"from distribution {info.distribution} {info.version or '(version unknown)'}"
            if info is not None and info.distribution
            else "(registered programmatically)"
        )
        raise PluginValidationError(exc.plugin, f'plugin "{name}" {origin}: {exc}') from exc
    return manager


def _register_extra(manager: PluginManager, plugin: object) -> None:
    """Register a programmatic extra; one that is loaded already (an installed plugin passed
    again, or an object registered twice) is an error naming where it came from."""
    pm = manager.pm
    holder = pm.get_name(plugin)
    if holder is None and pm.has_plugin(name := pm.get_canonical_name(plugin)):
        holder = name
    if holder is not None:
        info = manager.infos.get(holder)
        origin = (
            f"the {info.kind} plugin {holder!r} from distribution {info.distribution} "
            f"{info.version or '(version unknown)'}"
            if info is not None and info.distribution
            else f"the plugin {holder!r}"
        )
        raise PluginImportError(
            f"extra plugin {plugin!r} is already loaded as {origin}; pass it as an extra only "
            f"when it is not installed, or block the installed one with {ENV_DISABLE}={holder}"
        )
    extra_name = pm.register(plugin)
    if extra_name is not None:
        manager.infos[extra_name] = PluginInfo(
            name=extra_name, kind="extra", distribution=None, version=None
        )


def _suggest(name: str, known: Iterable[str]) -> str:
    import difflib  # only for a name that matches nothing

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_env_names(
    manager: PluginManager,
    entry_points: Sequence[Any],
    env: Mapping[str, str],
    extra_names: Iterable[str | None],
) -> None:
    """Warn about names in ``PROMPTWEAVE_DISABLE_PLUGINS`` and ``PROMPTWEAVE_LOAD_PLUGINS`` that
    match nothing: a misspelled name would otherwise block or allow nothing, without a word."""
    if not _names(env.get(ENV_DISABLE)) and not _names(env.get(ENV_LOAD)):
        return  # nothing to check, and listing contrib reads a directory
    plugin_names = {
        *(dotted.rsplit(".", 1)[-1] for dotted in DEFAULT_PLUGINS),
        *available_contrib_plugins(),
        *(entry_point.name for entry_point in entry_points),
        *(name for name in extra_names if name is not None),
    }
    for name in _names(env.get(ENV_DISABLE)):
        if name not in plugin_names:
            log.warning(
                "%s names %r, which is no plugin's name%s; see promptweave plugins --all",
                ENV_DISABLE,
                name,
                _suggest(name, plugin_names),
            )
    distributions = {
        _normalize(entry_point.dist.name): entry_point.dist.name
        for entry_point in entry_points
        if entry_point.dist is not None
    }
    for name in _names(env.get(ENV_LOAD)):
        if _normalize(name) not in distributions:
            installed = ", ".join(sorted(distributions.values())) or "none"
            log.warning(
                "%s names %r, which is no installed distribution with promptweave plugins%s "
                "(installed: %s)",
                ENV_LOAD,
                name,
                _suggest(name, distributions.values()),
                installed,
            )


def _load_entry_points(
    manager: PluginManager, entry_points: Sequence[Any], allowlist: str | None
) -> None:
    pm = manager.pm
    allowed = None if allowlist is None else {_normalize(name) for name in _names(allowlist)}
    for entry_point in entry_points:
        dist = entry_point.dist
        dist_name = dist.name if dist is not None else "(unknown distribution)"
        version = dist.version if dist is not None else None
        if allowed is not None and _normalize(dist_name) not in allowed:
            continue
        if pm.is_blocked(entry_point.name):
            continue
        if entry_point.name in manager.infos:
            holder = manager.infos[entry_point.name]
            raise PluginImportError(
                f'plugin "{entry_point.name}" from distribution {dist_name} '
                f"{version or '(version unknown)'} has the name of the already loaded "
                f"{holder.kind} plugin from {holder.distribution}; rename its entry point"
            )
        try:
            plugin = entry_point.load()
        except Exception as exc:
            raise PluginImportError(
                f'Error importing plugin "{entry_point.name}" ({entry_point.value}) from '
                f"distribution {dist_name} {version or '(version unknown)'}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        pm.register(plugin, name=entry_point.name)
        manager.infos[entry_point.name] = PluginInfo(
            name=entry_point.name, kind="external", distribution=dist_name, version=version
        )
