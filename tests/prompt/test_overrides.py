"""Per-bot, per-group section overrides: the TOML file plugin and the override_section hook."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from promptweave import Config, ConfigError, Promptweave, SectionOverride, hookimpl
from promptweave.config import StoreConfig
from promptweave.prompt.overrides import OverridesFile
from promptweave.testing import TEST_ENVIRON

OVERRIDES = """
[bots."10001".groups."20001".sections.persona]
mode = "replace"
content = "【核心人格】\\n你是小织，在这个群里说话更简短。"

[bots."10001".groups."20001".sections.turn_policy]
mode = "append"
content = "- 本群禁止剧透。"

[bots."10001".groups."20001".sections.tool_context]
mode = "disable"

[bots."10001".groups."20009".sections.persona]
mode = "replace"
content = "别的群的人设"
"""


def _runtime(tmp_path: Path, text: str = OVERRIDES, **kwargs) -> Promptweave:
    path = tmp_path / "overrides.toml"
    path.write_text(text, encoding="utf-8")
    config = Config(
        overrides_file="overrides.toml", base_dir=tmp_path, store=StoreConfig(backend="memory")
    )
    return Promptweave.from_config(config, environ=TEST_ENVIRON, **kwargs)


def _sections(result):
    return {s.id: s for s in result.sections}


def test_file_overrides_replace_append_and_disable(tmp_path, rich_turn):
    result = _runtime(tmp_path).render(rich_turn)
    sections = _sections(result)
    assert sections["persona"].text == "【核心人格】\n你是小织，在这个群里说话更简短。"
    assert sections["persona"].override == "replace"
    assert sections["turn_policy"].text.endswith("不要编造。\n\n- 本群禁止剧透。")
    assert sections["tool_context"].status == "disabled"
    assert "【工具上下文】" not in result.system_prompt


def test_overrides_are_scoped_by_bot_and_group(tmp_path, rich_turn):
    runtime = _runtime(tmp_path)
    other_group = runtime.render(attrs.evolve(rich_turn, group_id="20002"))
    assert _sections(other_group)["persona"].override is None
    other_bot = runtime.render(attrs.evolve(rich_turn, bot=attrs.evolve(rich_turn.bot, id="10002")))
    assert _sections(other_bot)["persona"].override is None


def test_private_chats_get_no_overrides(tmp_path, rich_turn):
    result = _runtime(tmp_path).render(attrs.evolve(rich_turn, group_id=None))
    assert all(s.override is None for s in result.sections)


def test_override_content_is_sanitized_and_capped(tmp_path, rich_turn):
    text = (
        '[bots."10001".groups."20001".sections.persona]\nmode = "replace"\n'
        f'content = "\\u200b{"长" * 13000}"\n'
    )
    persona = _sections(_runtime(tmp_path, text).render(rich_turn))["persona"]
    assert persona.chars == 12000 and persona.text.startswith("长")


def test_malformed_file_names_the_key_path_and_the_turn_still_assembles(tmp_path, rich_turn):
    text = '[bots."10001".groups."20001".sections.persona]\nmode = "rewrite"\ncontent = "x"\n'
    result = _runtime(tmp_path, text).render(rich_turn)
    persona = _sections(result)["persona"]
    assert persona.status == "rendered" and persona.override is None
    assert "overrides.toml" in persona.error
    assert "$.bots['10001'].groups['20001'].sections['persona'].mode" in persona.error
    assert "【核心人格】\n你是小织，一个常驻在群聊里的伙伴" in result.system_prompt


def test_unknown_key_is_reported(tmp_path):
    path = tmp_path / "o.toml"
    path.write_text(
        '[bots."1".groups."2".sections.persona]\nmode = "disable"\ncolour = 1\n', encoding="utf-8"
    )
    with pytest.raises(
        ConfigError,
        match=r"extra fields found \(colour\) @ "
        r"\$\.bots\['1'\]\.groups\['2'\]\.sections\['persona'\]",
    ):
        OverridesFile.from_file(path)


def test_invalid_toml_is_reported_with_the_file(tmp_path):
    path = tmp_path / "o.toml"
    path.write_text("[bots\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"o\.toml: invalid TOML"):
        OverridesFile.from_file(path)


def test_edits_to_the_file_apply_on_the_next_turn(tmp_path, rich_turn):
    runtime = _runtime(tmp_path)
    assert _sections(runtime.render(rich_turn))["persona"].override == "replace"
    (tmp_path / "overrides.toml").write_text(
        '[bots."10001".groups."20001".sections.persona]\nmode = "disable"\n', encoding="utf-8"
    )
    assert _sections(runtime.render(rich_turn))["persona"].status == "disabled"


class _DictOverrides:
    """Overrides backed by a plain dict, as a bot's admin console might keep them."""

    def __init__(self, table):
        self.table = table

    @hookimpl
    def override_section(self, section_id, text, bot_id, group_id, context):
        found = self.table.get((bot_id, group_id, section_id))
        return SectionOverride(mode=found[0], content=found[1]) if found else None


def test_hook_override_section(tmp_path, rich_turn):
    runtime = _runtime(tmp_path)
    runtime.add_plugin(
        _DictOverrides(
            {
                ("10001", "20001", "persona"): ("append", "- 在本群多用颜文字。"),
                ("10001", "20001", "current_time"): ("disable", ""),
            }
        ),
        name="console",
    )
    sections = _sections(runtime.render(rich_turn))
    # Another plugin's answer wins over the trylast file plugin.
    assert sections["persona"].override == "append"
    assert sections["persona"].text.endswith(
        "各群的措辞样例只用来贴近该群的说话习惯，不改变你是谁。\n\n- 在本群多用颜文字。"
    )
    assert sections["current_time"].status == "disabled"
    # Where the plugin says nothing, the file still applies.
    assert sections["tool_context"].status == "disabled"


def test_override_hook_that_raises_is_traced_not_fatal(tmp_path, rich_turn):
    class Broken:
        @hookimpl
        def override_section(self, section_id, text, bot_id, group_id, context):
            raise KeyError("console offline")

    runtime = _runtime(tmp_path)
    runtime.add_plugin(Broken(), name="broken")
    result = runtime.render(rich_turn)
    persona = _sections(result)["persona"]
    assert persona.status == "rendered"
    assert "override_section raised KeyError" in persona.error


def test_sections_listing_shows_overrides_in_force(tmp_path):
    rows = {r.id: r for r in _runtime(tmp_path).list_sections("10001", "20001")}
    assert rows["persona"].override == "replace"
    assert rows["tool_context"].override == "disable"
    assert rows["memory"].override is None
    private = _runtime(tmp_path).list_sections("10001", None)
    assert all(r.override is None for r in private)


def test_the_overrides_file_is_read_once_per_turn(tmp_path, rich_turn, monkeypatch):
    import promptweave.builtin_plugins.overrides_file as plugin

    calls = []
    original = plugin.load_overrides_file
    monkeypatch.setattr(
        plugin, "load_overrides_file", lambda path: calls.append(path) or original(path)
    )
    runtime = _runtime(tmp_path)
    runtime.render(rich_turn)
    assert len(calls) == 1
    runtime.render(rich_turn)
    assert len(calls) == 2


class _CountingOverrides:
    """An override source that counts the hook calls and says when it has something."""

    def __init__(self, active) -> None:
        self.active = active
        self.calls = 0

    def has_overrides(self, context):
        if isinstance(self.active, Exception):
            raise self.active
        return self.active

    @hookimpl
    def override_section(self, section_id, text, bot_id, group_id, context):
        self.calls += 1
        return SectionOverride(mode="append", content="- 计数") if section_id == "persona" else None


def _bare_runtime(**config) -> Promptweave:
    return Promptweave.from_config(
        Config(store=StoreConfig(backend="memory"), **config), environ=TEST_ENVIRON
    )


def test_the_hook_is_not_called_when_no_plugin_has_overrides_for_the_turn(rich_turn):
    runtime = _bare_runtime()
    counting = _CountingOverrides(active=False)
    runtime.add_plugin(counting, name="counting")
    result = runtime.render(rich_turn)
    assert counting.calls == 0
    assert _sections(result)["persona"].override is None


@pytest.mark.parametrize("active", [True, RuntimeError("probe failed")])
def test_the_hook_is_called_for_every_section_when_a_plugin_may_have_overrides(rich_turn, active):
    runtime = _bare_runtime()
    counting = _CountingOverrides(active=active)
    runtime.add_plugin(counting, name="counting")
    result = runtime.render(rich_turn)
    assert counting.calls == len(runtime.registries.sections)
    assert _sections(result)["persona"].text.endswith("- 计数")


def test_a_plugin_without_has_overrides_is_always_asked(rich_turn):
    runtime = _bare_runtime()
    runtime.add_plugin(_DictOverrides({("10001", "20001", "persona"): ("disable", "")}), "dict")
    assert _sections(runtime.render(rich_turn))["persona"].status == "disabled"


def test_the_file_plugin_is_not_asked_for_a_group_the_file_does_not_name(
    tmp_path, rich_turn, monkeypatch
):
    asked = []
    original = OverridesFile.lookup
    monkeypatch.setattr(
        OverridesFile,
        "lookup",
        lambda self, bot_id, group_id, section_id: (
            asked.append(section_id) or original(self, bot_id, group_id, section_id)
        ),
    )
    runtime = _runtime(tmp_path)
    runtime.render(attrs.evolve(rich_turn, group_id="20002"))  # no entry for this group
    assert asked == []
    runtime.render(rich_turn)  # group 20001 has entries: every section is asked
    assert len(asked) == len(runtime.registries.sections)
    bare = _bare_runtime()  # no file configured at all
    assert not bare.assembler.overrides_possible(bare.context_for(rich_turn))
