"""Per-conversation state: the note queue, the prompt store, request memory, config."""

from __future__ import annotations

import hashlib
import logging

import attrs
import pytest
from support_turn_context import example_turn, make_runtime

from promptweave import (
    ConfigError,
    PromptMessage,
    ProviderApi,
    build_provider_request,
    build_turn_context,
)
from promptweave.config import Config
from promptweave.providers.exchange import ProviderSpec
from promptweave.turn_context.conversation_state import (
    MAX_QUEUED_NOTES,
    ActiveSystemPrompt,
    ConversationState,
    InMemorySystemPromptStore,
    NoteQueue,
    SystemPromptStore,
    TurnTranscript,
    conversation_key,
    message_fingerprint,
    split_conversation_key,
)


def test_conversation_key_names_bot_group_and_speaker():
    turn = example_turn()
    assert conversation_key(turn) == "10001:20001:30017"
    assert conversation_key(attrs.evolve(turn, group_id=None)) == "10001:@private:30017"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("1", "2:3", "u"), ("1:2", "3", "u")),
        (("1", "2", "3:u"), ("1", "2:3", "u")),
        (("1", "private", "u"), ("1", None, "u")),
        (("1", "@private", "u"), ("1", None, "u")),
        (("1", "%40private", "u"), ("1", "@private", "u")),
    ],
)
def test_conversation_keys_of_different_scopes_never_collide(one, other):
    def key(bot, group, sender):
        turn = example_turn()
        return conversation_key(
            attrs.evolve(
                turn,
                bot=attrs.evolve(turn.bot, id=bot),
                group_id=group,
                message=attrs.evolve(turn.message, sender_id=sender),
            )
        )

    assert key(*one) != key(*other)
    assert split_conversation_key(key(*one)) == one
    assert split_conversation_key(key(*other)) == other


def test_note_queue_is_per_conversation_and_bounded(caplog):
    queue = NoteQueue()
    queue.push("a", "一")
    queue.push("b", "二")
    assert queue.pop("a") == ("一",) and queue.pop("a") == ()
    with caplog.at_level(logging.WARNING, logger="promptweave"):
        for number in range(MAX_QUEUED_NOTES + 2):
            queue.push("c", f"备注{number}")
    pending = queue.pending("c")
    assert len(pending) == MAX_QUEUED_NOTES and pending[0] == "备注2"
    assert "oldest note was dropped" in caplog.text
    assert queue.pending("b") == ("二",)


def test_prompt_store_forgets_the_least_recently_used():
    store = InMemorySystemPromptStore(max_conversations=2)
    prompt = ActiveSystemPrompt(text="x", sections=(("persona", "x"),), static_fingerprint="f")
    store.put("a", prompt)
    store.put("b", prompt)
    assert store.get("a") == prompt  # "a" is now the most recent
    store.put("c", prompt)
    assert (store.get("a"), store.get("b"), store.get("c")) == (prompt, None, prompt)
    store.invalidate("a")
    assert store.get("a") is None


def test_default_state_implements_the_protocols():
    state = ConversationState()
    assert isinstance(state.system_prompts, SystemPromptStore)
    assert isinstance(state.transcript, TurnTranscript)


def test_remember_request_returns_the_previous_body_per_api():
    state = ConversationState()
    assert state.remember_request("k", "openai_chat", b"1") is None
    assert state.remember_request("k", "anthropic", b"x") is None
    assert state.remember_request("k", "openai_chat", b"2") == b"1"


def test_text_provider_adds_marks_only_where_missing():
    runtime = make_runtime()
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    shown = PromptMessage(role="user", content="看这个 [图片]", images=("https://a/1.png",))
    two = PromptMessage(role="user", content="两张", images=("https://a/1.png", "https://a/2.png"))
    context = attrs.evolve(context, messages=(shown, two), current_turn_user_idx=1)
    spec = ProviderSpec(api=ProviderApi.OPENAI_CHAT, model="m", supports_images=False)
    body = build_provider_request(runtime, context, spec).body
    assert [m["content"] for m in body["messages"][1:]] == ["看这个 [图片]", "两张\n[图片] [图片]"]


def test_config_file_reads_turn_context_and_provider(tmp_path):
    path = tmp_path / "promptweave.toml"
    path.write_text(
        '[turn_context]\nthreshold_tokens = 8000\nturn_sections = "user"\n'
        '[provider]\napi = "anthropic"\ninline_images = true\n',
        encoding="utf-8",
    )
    config = Config.from_file(path)
    assert (config.turn_context.threshold_tokens, config.turn_context.turn_sections) == (
        8000,
        "user",
    )
    assert (config.provider.api, config.provider.inline_images) == ("anthropic", True)
    path.write_text('[provider]\napi = "gemini"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\$\.provider"):
        Config.from_file(path)


def test_a_fingerprint_is_the_digest_of_role_and_content_whatever_else_the_message_carries():
    expected = hashlib.sha256("user\0周六几点？\0".encode()).hexdigest()
    for _ in range(2):  # the second time from what is kept
        assert message_fingerprint(PromptMessage(role="user", content="周六几点？")) == expected
    assert (
        message_fingerprint(
            PromptMessage(role="user", content="周六几点？", api_content="x", parts=("p",))
        )
        == expected
    )
    assert message_fingerprint(PromptMessage(role="assistant", content="周六几点？")) != expected
    lone = PromptMessage(role="user", content="\ud800")
    assert (
        message_fingerprint(lone)
        == hashlib.sha256("user\0\ud800\0".encode("utf-8", "surrogatepass")).hexdigest()
    )
