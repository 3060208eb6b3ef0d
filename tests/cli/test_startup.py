"""What the ``promptweave`` command does to start fast: the code attrs and cattrs generate is read
back from disk instead of compiled, and behaves exactly as freshly compiled code; the collector is
paused while the modules load and skipped at exit (``docs/performance.md``)."""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
from pathlib import Path

import attr._make
import attrs
import cattrs
import cattrs.gen
import pytest
from base_support import RENDER_SCRIPT, ROOT

# First, as the command does: importing the startup module alone would leave the collector paused.
import promptweave.cli.main  # noqa: F401
from promptweave.cli.startup import CodeCache, _cache_file, _with_constant, _without_salt


@pytest.fixture
def file(tmp_path: Path) -> Path:
    return tmp_path / "code.marshal"


def _use(monkeypatch: pytest.MonkeyPatch, cache: CodeCache | None) -> None:
    """Build the next classes and structuring functions through ``cache`` (``None``: the
    builtin ``compile``, as without the cache)."""
    for module in (attr._make, cattrs.gen):
        monkeypatch.setattr(module, "compile", builtins.compile if cache is None else cache.compile)


def _record_class() -> type:
    @attrs.frozen(kw_only=True)
    class Reading:
        station: str
        values: tuple[int, ...] = attrs.field(default=(), validator=attrs.validators.max_len(3))
        note: str | None = None

    return Reading


def _behaviour(cls: type) -> tuple[object, ...]:
    """What a record class does: construction, validation, repr, equality, hashing, structuring."""
    one = cls(station="a", values=(1, 2))
    with pytest.raises(ValueError, match="Length of 'values'"):
        cls(station="a", values=(1, 2, 3, 4))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        one.station = "b"
    structured = cattrs.Converter().structure({"station": "s", "values": [3]}, cls)
    return (
        repr(one),
        one == cls(station="a", values=(1, 2)),
        one == cls(station="b"),
        hash(one),
        hash(cls(station="b")),
        repr(structured),
        attrs.asdict(structured),
    )


def test_code_read_back_behaves_as_freshly_compiled_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "cache" / "code.marshal"
    _use(monkeypatch, None)
    expected = _behaviour(_record_class())
    first = CodeCache(file)
    _use(monkeypatch, first)
    assert _behaviour(_record_class()) == expected
    assert first.compiled > 0
    first.save()
    assert file.parent.stat().st_mode & 0o077 == 0  # it holds code: private to its user
    second = CodeCache(file)
    _use(monkeypatch, second)
    assert _behaviour(_record_class()) == expected
    assert second.compiled == 0
    assert set(second.used) == set(first.used)


def test_a_changed_class_is_compiled_again(file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CodeCache(file)
    _use(monkeypatch, cache)
    _record_class()
    compiled = cache.compiled

    @attrs.frozen(kw_only=True)
    class Reading:
        station: str
        unit: str = "hPa"

    assert cache.compiled > compiled
    assert repr(Reading(station="a")) == "Reading(station='a', unit='hPa')"


def test_the_hash_salt_of_each_process_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    filename = "<attrs generated methods pkg.module.Reading>"
    salt = hash("<attrs generated hash pkg.module.Reading>")
    source = f"def __hash__(self):\n    return hash((\n        {salt},\n        self.a,\n    ))\n"
    found, stable = _without_salt(source, filename)
    assert found == salt
    assert str(salt) not in stable
    namespace: dict[str, object] = {}
    code = _with_constant(builtins.compile(stable, filename, "exec"), 0x5A17_5A17_5A17_5A17, salt)
    exec(code, namespace)
    expected: dict[str, object] = {}
    exec(builtins.compile(source, filename, "exec"), expected)
    holder = type("Holder", (), {"a": 7})()
    assert namespace["__hash__"](holder) == expected["__hash__"](holder)  # type: ignore[operator]


def test_the_future_flags_of_the_caller_are_kept(file: Path) -> None:
    cache = CodeCache(file)
    source = "def f(x: not_defined_anywhere) -> None: pass\n"
    plain: dict[str, object] = {"cache": cache, "source": source}
    exec(
        builtins.compile(
            "code = cache.compile(source, '<t>', 'exec')", "<caller>", "exec", dont_inherit=True
        ),
        plain,
    )
    with pytest.raises(NameError):
        exec(plain["code"], {})  # type: ignore[arg-type]
    postponed: dict[str, object] = {"cache": cache, "source": source}
    exec(
        builtins.compile(
            "from __future__ import annotations\ncode = cache.compile(source, '<t>', 'exec')",
            "<caller>",
            "exec",
            dont_inherit=True,
        ),
        postponed,
    )
    exec(postponed["code"], {})  # type: ignore[arg-type]
    assert cache.compiled == 2


def test_a_file_others_may_write_is_not_read(file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CodeCache(file)
    _use(monkeypatch, cache)
    _record_class()
    cache.save()
    assert file.stat().st_mode & 0o077 == 0
    assert CodeCache(file).codes
    file.chmod(0o666)
    assert CodeCache(file).codes == {}
    file.chmod(0o600)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(file).st_uid + 1)
    assert CodeCache(file).codes == {}


def test_a_damaged_file_is_an_empty_cache(file: Path) -> None:
    file.write_bytes(b"\x00not marshal")
    assert CodeCache(file).codes == {}
    file.write_bytes(__import__("marshal").dumps([1, 2]))
    assert CodeCache(file).codes == {}


def test_a_run_that_compiled_nothing_or_too_much_writes_nothing(
    file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    CodeCache(file).save()
    assert not file.exists()
    cache = CodeCache(file)
    _use(monkeypatch, cache)
    _record_class()
    monkeypatch.setattr("promptweave.cli.startup.MAX_ENTRIES", len(cache.used) - 1)
    cache.save()
    assert not file.exists()


def test_the_file_is_in_the_cache_directory_unless_that_is_set_empty(tmp_path: Path) -> None:
    assert _cache_file({"PROMPTWEAVE_CACHE_DIR": ""}) is None
    file = _cache_file({"XDG_CACHE_HOME": str(tmp_path)})
    assert file is not None and file.parent == tmp_path / "promptweave"
    assert sys.implementation.cache_tag in file.name


def _render_in_a_fresh_process(cache_dir: str) -> tuple[str, int]:
    script = (
        "import contextlib, io, json\n"
        "from promptweave.cli.main import cli\n"
        "from promptweave.cli.startup import CODE_CACHE\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        cli(['render', 'examples/turns/at_question.json', '--format', 'openai'],"
        " prog_name='promptweave')\n"
        "    except SystemExit as exit:\n"
        "        assert not exit.code, exit.code\n"
        "print(json.dumps([out.getvalue(), CODE_CACHE.compiled]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PROMPTWEAVE_CACHE_DIR": cache_dir},
    )
    output, compiled = json.loads(result.stdout.splitlines()[-1])
    return output, compiled


def test_a_second_command_compiles_nothing_and_prints_the_same(tmp_path: Path) -> None:
    first, compiled_first = _render_in_a_fresh_process(str(tmp_path))
    second, compiled_second = _render_in_a_fresh_process(str(tmp_path))
    assert compiled_first > 100
    assert compiled_second == 0
    assert second == first
    cache_off, compiled_off = _render_in_a_fresh_process("")
    assert cache_off == first
    assert compiled_off == compiled_first


def test_the_collector_is_paused_while_the_command_loads_and_resumed_after() -> None:
    script = (
        "import gc, attrs, cattrs, click, difflib, importlib, logging, pathlib\n"
        "import promptweave.cli.startup\n"
        "print(gc.isenabled())\n"
        "before = [stats['collections'] for stats in gc.get_stats()]\n"
        "import promptweave.cli.main\n"
        "after = [stats['collections'] for stats in gc.get_stats()]\n"
        "print(before == after, gc.isenabled(), gc.get_freeze_count() > 1000)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.stdout.split() == ["False", "True", "True", "True"]


def test_a_generator_imported_later_gets_the_cache_before_its_code_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # attrs builds classes of its own while its package is imported: the cache's compile must
    # be in attr._make's namespace before the module's code runs, not after.
    from promptweave.cli.startup import _CompileBeforeExec

    (tmp_path / "late_generator.py").write_text(
        "CODE = compile('6 * 7', '<generated>', 'eval')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    calls: list[object] = []

    def counting_compile(source: object, *args: object) -> object:
        calls.append(source)
        return builtins.compile(source, *args)  # type: ignore[call-overload]

    finder = _CompileBeforeExec(["late_generator"], counting_compile)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.delitem(sys.modules, "late_generator", raising=False)
    import late_generator  # type: ignore[import-not-found]

    assert calls == ["6 * 7"]
    assert eval(late_generator.CODE) == 42
    assert finder not in sys.meta_path  # every pending module is in: the finder left
    assert late_generator.__loader__.get_source("late_generator").startswith("CODE =")
    assert late_generator.__file__ == str(tmp_path / "late_generator.py")


def test_a_second_command_calls_the_builtin_compile_not_once(tmp_path: Path) -> None:
    # attrs' own classes, the records, the structuring functions and typing's annotation
    # strings: the command's second start compiles none of them.
    script = (
        "import builtins, contextlib, io, json, sys\n"
        "calls = []\n"
        "real = builtins.compile\n"
        "def counting(*args, **kwargs):\n"
        "    caller = sys._getframe(1).f_globals.get('__name__')\n"
        "    # a module without bytecode on disk (PYTHONDONTWRITEBYTECODE, a read-only tree)\n"
        "    if caller not in ('importlib._bootstrap', '_frozen_importlib'):\n"
        "        calls.append(caller)\n"
        "    return real(*args, **kwargs)\n"
        "builtins.compile = counting\n" + RENDER_SCRIPT + "print(json.dumps(calls))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROMPTWEAVE_CACHE_DIR": str(tmp_path)}
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout.splitlines()[-1]
        )
        for _ in range(2)
    ]
    assert "promptweave.cli.startup" in runs[0]  # the first one compiled, through the cache
    assert runs[1] == []
