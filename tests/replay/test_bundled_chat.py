"""The bundled chat examples/replay/weekend_chat.onebot.jsonl: a well-formed OneBot v11 dump that
holds every situation it is bundled for, and retrieval data beside it that imports cleanly."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from base_support import ROOT
from click.testing import CliRunner

from promptweave import Config
from promptweave.cli.main import cli
from promptweave.contrib.onebot import parse_cq_string, parse_event
from promptweave.text.routing_words import SHUT_UP_WORDS, SPAM_WORDS, VENT_ENDINGS

REPLAY = ROOT / "examples" / "replay"
DUMP = REPLAY / "weekend_chat.onebot.jsonl"
SELF_ID = 10001
PEER_BOT_ID = 10002
GROUPS = {20001, 20002}
ALIASES = ("小织", "织织", "小织子")
SEGMENT_KEYS = {
    "text": {"text"},
    "at": {"qq"},
    "reply": {"id"},
    "image": {"file", "url"},
    "face": {"id"},
}
CQ_CODE = re.compile(r"\[CQ:[^\[\]]*\]")


def _load() -> list[dict[str, Any]]:
    lines = DUMP.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "", "the dump ends with a newline"
    return [json.loads(line) for line in lines[:-1]]


EVENTS = _load()
MESSAGES = [e for e in EVENTS if e["post_type"] in ("message", "message_sent")]
INCOMING = [e for e in MESSAGES if e["post_type"] == "message"]
SENT = [e for e in MESSAGES if e["post_type"] == "message_sent"]
BY_ID = {e["message_id"]: e for e in MESSAGES}


def _escape(text: str, *, in_param: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")
    return text.replace(",", "&#44;") if in_param else text


def _unescape(text: str) -> str:
    for plain, escaped in (("[", "&#91;"), ("]", "&#93;"), (",", "&#44;"), ("&", "&amp;")):
        text = text.replace(escaped, plain)
    return text


def _segments(event: dict[str, Any], kind: str) -> Iterator[dict[str, str]]:
    return (s["data"] for s in event["message"] if s["type"] == kind)


def _text(event: dict[str, Any]) -> str:
    return "".join(data["text"] for data in _segments(event, "text"))


def _conversation(event: dict[str, Any]) -> tuple[str, int]:
    if event["message_type"] == "group":
        return "group", event["group_id"]
    return "private", event["user_id"]


def _replies_to(event: dict[str, Any]) -> list[dict[str, Any]]:
    return [BY_ID[int(data["id"])] for data in _segments(event, "reply")]


def _at_bot(event: dict[str, Any]) -> bool:
    return any(data["qq"] == str(SELF_ID) for data in _segments(event, "at"))


def _addressed(event: dict[str, Any]) -> bool:
    """At the bot, a reply to the bot, or the bot's name typed at the start of the message."""
    named = _text(event).lstrip("@ ").startswith(ALIASES)
    replying = any(t["post_type"] == "message_sent" for t in _replies_to(event))
    return _at_bot(event) or replying or named


def test_the_dump_opens_with_a_lifecycle_connect_of_the_bot():
    first = EVENTS[0]
    assert first["post_type"] == "meta_event"
    assert (first["meta_event_type"], first["sub_type"]) == ("lifecycle", "connect")
    assert first["self_id"] == SELF_ID


def test_times_are_unix_seconds_that_never_go_back():
    times = [e["time"] for e in EVENTS]
    assert all(type(t) is int for t in times)
    assert times == sorted(times)
    # An evening: from after six in the afternoon to past midnight, Beijing time.
    assert 3 * 3600 < times[-1] - times[0] < 12 * 3600


@pytest.mark.parametrize("event", MESSAGES, ids=lambda e: str(e["message_id"]))
def test_message_events_carry_every_onebot_field_with_its_type(event):
    ints = ("message_id", "user_id", "self_id", "time", "font")
    assert all(type(event[key]) is int for key in ints)
    assert event["self_id"] == SELF_ID
    assert event["font"] == 0
    assert isinstance(event["raw_message"], str)
    sender = event["sender"]
    assert sender["user_id"] == event["user_id"]
    assert isinstance(sender["nickname"], str) and sender["nickname"]
    assert isinstance(sender["card"], str)
    if event["message_type"] == "group":
        assert event["sub_type"] == "normal"
        assert type(event["group_id"]) is int and event["group_id"] in GROUPS
        assert sender["role"] in ("owner", "admin", "member")
    else:
        assert event["message_type"] == "private"
        assert event["sub_type"] == "friend"
        assert "group_id" not in event
    if event["post_type"] == "message_sent":
        assert event["user_id"] == SELF_ID
    else:
        assert event["user_id"] != SELF_ID
    assert event["message"], "no empty messages"
    for segment in event["message"]:
        assert set(segment) == {"type", "data"}
        assert set(segment["data"]) == SEGMENT_KEYS[segment["type"]]
        assert all(isinstance(value, str) and value for value in segment["data"].values())


@pytest.mark.parametrize("event", MESSAGES, ids=lambda e: str(e["message_id"]))
def test_raw_message_is_the_cq_code_form_of_the_segments(event):
    expected = []
    for segment in event["message"]:
        kind, data = segment["type"], segment["data"]
        if kind == "text":
            expected.append(_escape(data["text"]))
        else:
            params = "".join(f",{k}={_escape(v, in_param=True)}" for k, v in data.items())
            expected.append(f"[CQ:{kind}{params}]")
    raw = event["raw_message"]
    assert raw == "".join(expected)
    assert _unescape(CQ_CODE.sub("", raw)) == _text(event)
    assert parse_cq_string(raw) == event["message"]


def test_cq_escaping_is_exercised_in_text_and_in_parameters():
    raws = [e["raw_message"] for e in MESSAGES]
    assert any("&#91;" in raw and "&#93;" in raw for raw in raws)
    assert any("&amp;" in CQ_CODE.sub("", raw) for raw in raws)
    assert any("&amp;" in code for raw in raws for code in CQ_CODE.findall(raw))


def test_message_ids_are_unique():
    ids = [e["message_id"] for e in MESSAGES]
    assert len(ids) == len(set(ids))


def test_every_reply_quotes_an_earlier_message_of_the_same_conversation():
    seen: set[int] = set()
    for event in MESSAGES:
        for data in _segments(event, "reply"):
            quoted = int(data["id"])
            assert quoted in seen, f"{event['message_id']} quotes {quoted}, not seen before"
            assert _conversation(BY_ID[quoted]) == _conversation(event)
        seen.add(event["message_id"])


def test_notices_name_members_and_messages_of_the_dump():
    notices = [e for e in EVENTS if e["post_type"] == "notice"]
    kinds = Counter(e["notice_type"] for e in notices)
    assert kinds["group_decrease"] >= 2 and kinds["group_recall"] >= 1
    speakers = {(e.get("group_id"), e["user_id"]) for e in INCOMING}
    for notice in notices:
        assert notice["group_id"] in GROUPS
        assert (notice["group_id"], notice["user_id"]) in speakers
        if notice["notice_type"] == "group_recall":
            recalled = BY_ID[notice["message_id"]]
            assert recalled["user_id"] == notice["user_id"]
            assert recalled["time"] <= notice["time"]


def test_the_chat_is_large_enough_to_replay():
    assert len(INCOMING) >= 300
    assert {e["group_id"] for e in MESSAGES if e["message_type"] == "group"} == GROUPS
    per_speaker = Counter(e["user_id"] for e in INCOMING if e["user_id"] != PEER_BOT_ID)
    assert sum(1 for count in per_speaker.values() if count >= 3) >= 8


def test_each_group_holds_bot_messages_that_members_reply_to():
    for group in GROUPS:
        sent = [e for e in SENT if e["group_id"] == group]
        assert len(sent) >= 3
        replied = {
            target["message_id"]
            for e in INCOMING
            if e.get("group_id") == group
            for target in _replies_to(e)
            if target["post_type"] == "message_sent"
        }
        assert len(replied) >= 2


def test_members_quote_each_other():
    quotes = [
        e
        for e in INCOMING
        if any(t["post_type"] == "message" and t["user_id"] != e["user_id"] for t in _replies_to(e))
    ]
    assert len(quotes) >= 20
    assert {e["group_id"] for e in quotes} == GROUPS


def test_questions_reach_the_bot_by_at_and_by_its_typed_name():
    at_questions = [e for e in INCOMING if _at_bot(e) and e["message_type"] == "group"]
    assert {e["group_id"] for e in at_questions} == GROUPS
    typed = [e for e in INCOMING if not _at_bot(e) and _text(e).lstrip("@ ").startswith(ALIASES)]
    assert len(typed) >= 10
    assert any(_text(e).startswith("@小织") for e in typed), "an @ typed by hand, not a segment"


def test_images_are_https_urls_that_the_onebot_parser_keeps():
    with_images = [e for e in MESSAGES if any(s["type"] == "image" for s in e["message"])]
    assert len(with_images) >= 10
    for event in with_images:
        urls = tuple(data["url"] for data in _segments(event, "image"))
        assert all(url.startswith("https://multimedia.nt.qq.com.cn/download?") for url in urls)
        assert parse_event(event).message.images == urls


def _only_symbols(text: str) -> bool:
    return bool(text) and all(unicodedata.category(ch) == "So" for ch in text.strip())


def test_some_messages_are_only_emoji_or_only_faces():
    faces_only = [e for e in INCOMING if {s["type"] for s in e["message"]} == {"face"}]
    emoji_only = [e for e in INCOMING if [s["type"] for s in e["message"]] == ["text"]]
    assert len(faces_only) >= 10
    assert sum(1 for e in emoji_only if _only_symbols(_text(e))) >= 3


def test_a_member_tells_the_bot_to_be_quiet():
    def hushes(event: dict[str, Any]) -> bool:
        return _addressed(event) and any(word in _text(event) for word in SHUT_UP_WORDS)

    assert any(hushes(e) for e in INCOMING)
    # A shut-up word aimed at a member, not the bot, is there too.
    assert any(not _addressed(e) and "闭嘴" in _text(e) and _replies_to(e) for e in INCOMING)


def test_advertising_with_a_link_is_posted_in_both_groups():
    spam = [
        e
        for e in INCOMING
        if re.search(r"https?://", _text(e)) and any(word in _text(e) for word in SPAM_WORDS)
    ]
    assert {e["group_id"] for e in spam} == GROUPS


def test_one_member_talks_to_the_bot_long_enough_to_compress_the_session():
    threshold = Config().session.summary_threshold
    addressed = Counter((e.get("group_id"), e["user_id"]) for e in INCOMING if _addressed(e))
    (_scope, _user), most = addressed.most_common(1)[0]
    assert most >= 30
    assert most > threshold


def test_tool_worthy_requests_are_made():
    texts = [_text(e) for e in INCOMING if _addressed(e) or e["message_type"] == "private"]
    assert any("周末" in t and "活动" in t for t in texts)
    assert sum(1 for t in texts if "掷" in t and "骰子" in t) >= 2


def test_a_prompt_injection_is_attempted_at_the_bot():
    assert any(_at_bot(e) and "忽略以上规则" in _text(e) for e in INCOMING)
    assert any(_addressed(e) and "提示词" in _text(e) for e in INCOMING)


def test_a_member_vents_in_a_few_words():
    def vent(text: str) -> bool:
        return len(text) <= 8 and text.rstrip("。！!~～").endswith(VENT_ENDINGS)

    assert any(vent(_text(e)) for e in INCOMING)


def test_private_chats_come_from_members_of_the_groups():
    private = [e for e in INCOMING if e["message_type"] == "private"]
    members = {e["user_id"] for e in INCOMING if e["message_type"] == "group"}
    assert len(private) >= 2
    assert {e["user_id"] for e in private} <= members


@pytest.mark.parametrize("event", MESSAGES, ids=lambda e: str(e["message_id"]))
def test_the_onebot_parser_reads_every_message(event):
    parsed = parse_event(event)
    message = parsed.message
    assert parsed.bot_id == str(SELF_ID)
    assert parsed.group_id == (str(event["group_id"]) if "group_id" in event else None)
    assert message.id == str(event["message_id"])
    assert message.sender_id == str(event["user_id"])
    assert message.addressed == _at_bot(event)
    assert message.reply_to == next((d["id"] for d in _segments(event, "reply")), None)
    assert message.text or message.images or message.reply_to


def _knowledge_text(folder: Path) -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.md")))


def test_the_retrieval_data_imports_without_a_problem(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "import",
            "auto",
            str(REPLAY / "data"),
            "--store",
            str(tmp_path / "replay.sqlite3"),
            "--bot",
            "10001",
            "--group",
            "20001",
        ],
    )
    assert result.exit_code == 0, result.output
    read = result.output.splitlines()[0].removeprefix("read ")
    counts = [part.split(" ", 1) for part in read.split(", ")]
    assert {kind for _count, kind in counts} == {
        "memories",
        "knowledge documents",
        "relationships",
        "person facts",
        "expression pairs",
        "rhythms",
        "strategies",
        "summaries",
    }
    assert all(int(count) > 0 for count, _kind in counts)


def test_the_knowledge_lists_the_activities_the_chat_talks_about():
    knowledge = _knowledge_text(REPLAY / "data" / "knowledge")
    chat = "\n".join(_text(e) for e in INCOMING if e.get("group_id") == 20001)
    for activity in ("桌游局", "飞盘", "年终聚餐"):
        assert activity in knowledge
        assert activity in chat
    scoped: defaultdict[str, list[str]] = defaultdict(list)
    for path in (REPLAY / "data").rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            scoped[json.loads(line).get("group_id", "20001")].append(path.name)
    assert set(scoped) == {str(group) for group in GROUPS}
