"""What the ``promptweave`` command does before it loads its modules, to start fast
(``docs/performance.md``).

**The code attrs and cattrs generate, kept on disk.** attrs writes the methods of every record
class (``__init__``, ``__eq__``, ``__repr__``…) as Python source and compiles it when the class
is built; cattrs does the same for each structuring function it makes. A ``promptweave render``
builds some two hundred of them, and compiling was a sixth of its run; attrs builds thirty
classes of its own as it loads, and :mod:`typing` compiles each annotation string cattrs reads.
The same source compiled with the same file name, mode and flags is the same code, so the
command keeps the code objects in one file (written with :mod:`marshal`, as the interpreter
writes ``__pycache__``) and compiles only sources it has not seen. ``PROMPTWEAVE_CACHE_DIR`` set
but empty turns the file off.

**The cycle collector paused while the modules load.** Loading allocates tens of thousands of
objects that live as long as the process (classes, functions, constants); the collector would
walk them again and again. :func:`modules_loaded` moves them out of its way and resumes it.

**No collection at exit.** :func:`skip_the_last_collection`: Python's shutdown runs the collector
over everything the command loaded, a tenth of a short command's time, just before the process
gives its memory back whole.

Importing this module installs the cache and pauses the collector: :mod:`promptweave.cli.main`
imports it first, before attrs, and calls :func:`modules_loaded` once its modules are in. The library never does any of this (a long-running process builds each class
once and needs its collector).
"""

from __future__ import annotations
import __future__

import atexit
import builtins
import functools
import gc
import hashlib
import marshal
import operator
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from promptweave._cache_dir import cache_directory

__all__ = [
    "CODE_CACHE",
    "GENERATORS",
    "CodeCache",
    "install_code_cache",
    "modules_loaded",
    "skip_the_last_collection",
]

#: The modules whose ``compile`` calls go through the cache: attrs' class builder, cattrs' code
#: generator and :mod:`typing`, which compiles each annotation string it meets
#: (``typing.ForwardRef``, some 200 of them when cattrs reads the records' annotations). Each
#: calls the builtin by its global name, which a module global shadows.
GENERATORS = ("attr._make", "cattrs.gen", "typing")

#: The most code objects the file holds (a ``promptweave render`` uses some 500; every one is
#: read at start-up, about 5 µs each). Past it a write keeps only what its run used, so the code
#: of classes edited long ago does not pile up; a process that used more (a test run) is no
#: command start-up and writes nothing.
MAX_ENTRIES = 1000

#: attrs' generated file names, ``<attrs generated methods pkg.module.Class>`` (``-2``… added
#: when the name is taken).
_ATTRS_FILENAME = re.compile(r"<attrs generated \S+ (?P<qualified>.+?)(?:-\d+)?>")
#: A number no generated source holds, compiled in place of the salt of ``__hash__``.
_SALT_STAND_IN = 0x5A17_5A17_5A17_5A17

#: The flags a ``compile`` call inherits from the code that calls it (``from __future__``).
_FUTURE_FLAGS = functools.reduce(
    operator.or_,
    (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names),
)


class CodeCache:
    """A ``compile`` that looks the code up first.

    :param file: where the code is read from and written to; ``None`` keeps it in memory.
    """

    def __init__(self, file: Path | None) -> None:
        self.file = file
        self.codes: dict[bytes, CodeType] = self._read()
        self.used: dict[bytes, CodeType] = {}
        #: How many sources this run compiled because the cache did not hold them.
        self.compiled = 0

    def _read(self) -> dict[bytes, CodeType]:
        if self.file is None:
            return {}
        try:
            with self.file.open("rb") as stream:
                if not _trusted(os.fstat(stream.fileno())):
                    return {}
                loaded = marshal.loads(stream.read())
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if not isinstance(loaded, dict):
            return {}
        return {
            key: code
            for key, code in loaded.items()
            if isinstance(key, bytes) and isinstance(code, CodeType)
        }

    def compile(
        self,
        source: object,
        filename: object,
        mode: str,
        flags: int = 0,
        dont_inherit: bool = False,
        optimize: int = -1,
        **kwargs: object,
    ) -> object:
        """:func:`compile`, with the same result: the flags the caller would pass on by
        inheritance are passed explicitly, and are part of the key."""
        if not dont_inherit:
            flags |= sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS
        if kwargs or optimize != -1 or not isinstance(source, str) or not isinstance(filename, str):
            return builtins.compile(source, filename, mode, flags, True, optimize, **kwargs)  # type: ignore[call-overload]
        salt, source = _without_salt(source, filename)
        key = hashlib.blake2b(
            f"{mode}\0{flags}\0{filename}\0{source}".encode("utf-8", "surrogatepass"),
            digest_size=16,
        ).digest()
        code = self.codes.get(key)
        if code is None:
            code = builtins.compile(source, filename, mode, flags, True)
            self.codes[key] = code
            self.compiled += 1
        self.used[key] = code
        return code if salt is None else _with_constant(code, _SALT_STAND_IN, salt)

    def save(self) -> None:
        """Write the file if this run compiled anything (atomically: a process starting
        meanwhile reads the old file or the new one)."""
        if self.file is None or not self.compiled or len(self.used) > MAX_ENTRIES:
            return
        codes = self.codes if len(self.codes) <= MAX_ENTRIES else self.used
        temporary = self.file.with_name(f"{self.file.name}.{os.getpid()}.tmp")
        try:
            # Private: like ``__pycache__``, the file holds code the command runs.
            self.file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Readable and writable by its user alone, whatever the umask (see _trusted).
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(marshal.dumps(codes))
            os.replace(temporary, self.file)
        except OSError:
            # A read-only or full disk costs the compilations next time, nothing else.
            temporary.unlink(missing_ok=True)


def _trusted(status: os.stat_result) -> bool:
    """Code is only read from a file of this user that no one else may write (like the code of
    the installation itself): another user's file could make the command run anything."""
    if not hasattr(os, "getuid"):
        return True
    return status.st_uid == os.getuid() and not status.st_mode & 0o022


def _without_salt(source: str, filename: str) -> tuple[int | None, str]:
    """attrs salts each class's ``__hash__`` with ``hash()`` of a name, which differs from
    process to process (``PYTHONHASHSEED``): the source with that number replaced by a fixed
    stand-in, so it is the same in every run, and the number, to put back into the code."""
    match = _ATTRS_FILENAME.fullmatch(filename)
    if match is None:
        return None, source
    salt = hash(f"<attrs generated hash {match.group('qualified')}>")
    # The salt's line in the ``hash((...))`` call: eight spaces deeper than the call, alone.
    line = f"        {salt},\n"
    if str(_SALT_STAND_IN) in source or line not in source:
        return None, source
    return salt, source.replace(line, f"        {_SALT_STAND_IN},\n")


def _with_constant(code: CodeType, old: int, new: int) -> CodeType:
    """``code`` with every constant ``old`` (in nested functions too) replaced by ``new``; the
    same object where there is none, so the methods without the salt are not copied."""
    constants = code.co_consts
    changed: list[object] | None = None
    for index, constant in enumerate(constants):
        if type(constant) is int and constant == old:
            replaced: object = new
        elif isinstance(constant, CodeType):
            replaced = _with_constant(constant, old, new)
        else:
            continue
        if replaced is not constant:
            if changed is None:
                changed = list(constants)
            changed[index] = replaced
    return code if changed is None else code.replace(co_consts=tuple(changed))


def _cache_file(env: Mapping[str, str]) -> Path | None:
    directory = cache_directory(env)
    if directory is None:
        return None
    # Code objects are specific to the interpreter version and the optimisation level. (Not
    # ``attrs.__version__``: reading it parses the installed distributions' metadata.)
    return (
        directory / f"generated-code-{sys.implementation.cache_tag}-O{sys.flags.optimize}.marshal"
    )


class _CompileBeforeExec:
    """Puts the cache's ``compile`` into each of :data:`GENERATORS` not imported yet, before its
    code runs: attrs builds some thirty classes of its own while it is imported (attrs' package
    imports its submodules, which build them with ``attr._make``, before anything can reach the
    module from outside). A finder on :data:`sys.meta_path` that hands the other finders' spec on
    with its loader wrapped; it leaves the path once every module is in."""

    def __init__(self, names: Iterable[str], compile_: Callable[..., object]) -> None:
        self.pending = set(names)
        self.compile = compile_

    def find_spec(self, name: str, path: object, target: object = None) -> ModuleSpec | None:
        if name not in self.pending:
            return None
        self.pending.discard(name)
        if not self.pending:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = None if finder is self or find is None else find(name, path, target)
            if isinstance(spec, ModuleSpec):
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, self.compile)  # type: ignore[assignment]
                return spec
        return None


class _PatchingLoader:
    """A module's own loader, with ``compile`` set in the module's namespace before it runs;
    everything else (the source, the file name, resources) is the loader's."""

    def __init__(self, loader: Any, compile_: Callable[..., object]) -> None:
        self.loader = loader
        self.compile = compile_

    def create_module(self, spec: ModuleSpec) -> object:
        create = getattr(self.loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: ModuleType) -> None:
        vars(module)["compile"] = self.compile
        self.loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def install_code_cache(env: Mapping[str, str] | None = None) -> CodeCache:
    """Route the ``compile`` calls of :data:`GENERATORS` through a cache read from disk, and
    write it back when the process exits. The generators imported already are patched now, the
    others when they are imported (:class:`_CompileBeforeExec`)."""
    cache = CodeCache(_cache_file(os.environ if env is None else env))
    later = []
    for name in GENERATORS:
        if name in sys.modules:
            vars(sys.modules[name])["compile"] = cache.compile
        else:
            later.append(name)
    if later:
        sys.meta_path.insert(0, _CompileBeforeExec(later, cache.compile))
    atexit.register(cache.save)
    return cache


def modules_loaded() -> None:
    """Resume the collector paused on import, after moving what loading built to its permanent
    generation (objects it never walks again)."""
    gc.freeze()
    gc.enable()


@functools.cache
def skip_the_last_collection() -> None:
    """At exit, move every object to the collector's permanent generation, so the shutdown does
    not walk them (registered once per process). Only objects already unreachable in reference
    cycles lose their finalizers, as on any exit the collector does not reach."""
    atexit.register(gc.freeze)


gc.disable()
#: The cache of this process, installed on import.
CODE_CACHE = install_code_cache()
