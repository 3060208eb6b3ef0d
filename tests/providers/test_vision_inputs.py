"""Which images a request carries (``docs/design.md#images``): only valid HTTP(S) URLs are vision
images, wherever they come from; any other entry of a message's images stays a ``[图片]`` mark in
the text."""

from __future__ import annotations

import json

import attrs
import pytest
from support_turn_context import PNG_BYTES, example_turn, make_runtime
from timeline_support import timeline_lines

from promptweave import (
    IMAGE_WITHOUT_URL,
    Config,
    FetchedImage,
    Promptweave,
    ProviderApi,
    Turn,
    build_provider_request,
    build_turn_context,
    hookimpl,
)
from promptweave.config import ProviderConfig, StoreConfig
from promptweave.contrib.onebot import parse_message
from promptweave.providers.exchange import ProviderSpec
from promptweave.providers.wire import TIMELINE_IMAGES_TEXT
from promptweave.text.rules import IMAGE_MARK

CAT = "https://img.example.net/cat-1.jpg"
LOCAL = "file:///etc/passwd"
PLATFORM_ID = "abc123.image"
IMAGE_SPEC = {"supports_images": True, "inline_images": False}


def _with_timeline_images(turn: Turn, *images_by_id: tuple[str, tuple[str, ...]]) -> Turn:
    found = dict(images_by_id)
    recent = tuple(
        attrs.evolve(m, images=found[m.id]) if m.id in found else m for m in turn.recent_messages
    )
    return attrs.evolve(turn, recent_messages=recent)


def _request(turn: Turn, api: ProviderApi = ProviderApi.OPENAI_CHAT, runtime=None, **spec):
    runtime = runtime or make_runtime()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    options = {**IMAGE_SPEC, **spec}
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="m", **options))


def _sent_urls(body: dict) -> list[str]:
    """Every image URL of an OpenAI chat body, in order."""
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]


# -- only HTTP(S) URLs are vision images -------------------------------------------------------


def test_timeline_keeps_only_http_images_and_still_marks_the_others() -> None:
    older = ("https://img.example.net/a.jpg", "https://img.example.net/b.jpg")
    turn = _with_timeline_images(
        example_turn(),
        ("9101", older),
        ("9105", (LOCAL, CAT, PLATFORM_ID)),
        ("9107", (PLATFORM_ID,)),
    )
    rendered = make_runtime().render(turn)
    assert rendered.vision_images == (*older, CAT)
    timeline = next(s.text for s in rendered.sections if s.id == "group_timeline")
    # Every message with an image keeps its mark, the ones whose images are not sent included.
    for message_id in ("9107", "9105"):
        shown = next(m for m in turn.recent_messages if m.id == message_id)
        [line] = timeline_lines(turn, shown)
        assert IMAGE_MARK in line and line in timeline.splitlines()


@pytest.mark.parametrize("api", list(ProviderApi))
def test_no_other_scheme_reaches_a_provider(api: ProviderApi) -> None:
    turn = _with_timeline_images(example_turn(), ("9105", (LOCAL, CAT, PLATFORM_ID)))
    turn = attrs.evolve(
        turn,
        message=attrs.evolve(turn.message, images=("FILE:///home/bot/.ssh/id_rsa",)),
        quoted_message_images=("data:image/png;base64,AAAA", "ftp://example.net/x.png"),
    )
    text = _request(turn, api).body_text()
    for refused in ("file:", "FILE:", PLATFORM_ID, "data:", "ftp:"):
        assert refused not in text
    assert CAT in text


def test_current_and_quoted_images_keep_only_http_urls_in_any_case() -> None:
    upper = "HTTPS://IMG.EXAMPLE.NET/BOARD.JPG"
    turn = example_turn()
    turn = attrs.evolve(
        turn,
        message=attrs.evolve(turn.message, images=(LOCAL, upper)),
        quoted_message_images=(PLATFORM_ID, "https://img.example.net/map.jpg"),
    )
    runtime = make_runtime()
    rendered = runtime.render(turn)
    assert rendered.messages[-1].images == (upper,)
    assert rendered.messages[-1].content.splitlines()[1].startswith("[图片] ")
    context = build_turn_context(runtime, turn, rendered)
    assert context.current_message is not None
    assert context.current_message.images == (upper, "https://img.example.net/map.jpg")


def test_an_image_without_url_is_marked_for_the_model_and_fetches_nothing() -> None:
    fetched: list[str] = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            fetched.append(url)

    turn = example_turn()
    turn = attrs.evolve(turn, message=attrs.evolve(turn.message, text="", images=(PLATFORM_ID,)))
    runtime = make_runtime(extra_plugins=(Fetcher(),))
    request = _request(turn, runtime=runtime, inline_images=True)
    current = request.body["messages"][-1]["content"]
    assert isinstance(current, str) and current.endswith("[图片]")
    assert fetched == [CAT]  # the timeline's image only


def test_history_parts_with_other_schemes_become_image_marks() -> None:
    fetched: list[str] = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            fetched.append(url)

    runtime = make_runtime(extra_plugins=(Fetcher(),))
    turn = example_turn()
    context = build_turn_context(runtime, turn, runtime.render(turn))
    first = attrs.evolve(context.messages[0], images=(LOCAL, "https://img.example.net/old.jpg"))
    context = attrs.evolve(context, messages=(first, *context.messages[1:]))
    spec = ProviderSpec(api=ProviderApi.OPENAI_CHAT, model="m", supports_images=True)
    request = build_provider_request(runtime, context, attrs.evolve(spec, inline_images=True))
    assert LOCAL not in fetched and "https://img.example.net/old.jpg" in fetched
    by_url = build_provider_request(runtime, context, attrs.evolve(spec, inline_images=False))
    parts = by_url.body["messages"][1]["content"]
    assert [p.get("text") or p["image_url"]["url"] for p in parts[1:]] == [
        "[图片]",
        "https://img.example.net/old.jpg",
    ]
    assert LOCAL not in by_url.body_text() and LOCAL not in request.body_text()
    assert by_url.trace["images"]["sent"] == 2  # the history image and the timeline's


def test_invalid_entries_do_not_push_valid_images_out_of_the_limit() -> None:
    turn = _with_timeline_images(
        example_turn(),
        ("9101", ("https://img.example.net/a.jpg",)),
        ("9103", ("https://img.example.net/b.jpg",)),
        ("9105", (CAT, LOCAL, PLATFORM_ID, "http://", "https:///x.jpg")),
        ("9107", ("javascript:alert(1)", IMAGE_WITHOUT_URL)),
    )
    body = _request(turn).body
    assert _sent_urls(body) == [
        "https://img.example.net/a.jpg",
        "https://img.example.net/b.jpg",
        CAT,
    ]
    assert TIMELINE_IMAGES_TEXT in json.dumps(body, ensure_ascii=False)


# -- OneBot: an image without an HTTP URL -----------------------------------------------------


def test_onebot_image_without_url_keeps_its_mark_in_the_timeline() -> None:
    found = parse_message(
        "[CQ:image,file=abc123.image,url=]",
        bot_id="10001",
        sender_id="30022",
        time=example_turn().message.time,
        message_id="9107",
    )
    assert found.text == "" and found.images == (IMAGE_WITHOUT_URL,)
    turn = example_turn()
    recent = (*turn.recent_messages[:-1], attrs.evolve(found, sender_name="阿蒙"))
    rendered = make_runtime().render(attrs.evolve(turn, recent_messages=recent))
    timeline = next(s.text for s in rendered.sections if s.id == "group_timeline")
    [line] = timeline_lines(turn, recent[-1])
    assert line.endswith(IMAGE_MARK) and timeline.splitlines()[-1] == line
    assert rendered.vision_images == (CAT,)


def test_onebot_keeps_http_urls_in_any_case_and_counts_every_image() -> None:
    found = parse_message(
        [
            {"type": "image", "data": {"file": "a.image", "url": "HTTPS://img.example/a.jpg"}},
            {"type": "image", "data": {"file": "file:///tmp/b.jpg"}},
            {"type": "mface", "data": {"url": "", "summary": "[摸摸头]"}},
        ],
        bot_id="10001",
        sender_id="30022",
        time=example_turn().message.time,
    )
    assert found.images == ("HTTPS://img.example/a.jpg", IMAGE_WITHOUT_URL, IMAGE_WITHOUT_URL)


# -- the quoted message's images are the current image ----------------------------------------


def _asking_about_9105(text: str = "@小织 这是什么猫", **turn: object) -> Turn:
    base = _with_timeline_images(example_turn(), ("9101", ("https://img.example.net/old.jpg",)))
    message = attrs.evolve(
        base.message,
        id="9110",
        text=text,
        raw=f"[CQ:reply,id=9105][CQ:at,qq=10001] {text.removeprefix('@小织 ')}",
        reply_to="9105",
    )
    return attrs.evolve(base, message=message, **turn)


def test_a_reply_sends_the_quoted_messages_image_as_the_current_image() -> None:
    runtime = make_runtime()
    turn = _asking_about_9105()
    rendered = runtime.render(turn)
    assert rendered.trace["messages"]["sources"]["quoted_message_images"] == "recent_messages"
    # A recognition question about the quoted image: no history image pulls the answer away.
    assert rendered.vision_images == ()
    assert rendered.trace["vision"] == {
        "current": [CAT],
        "images": [],
        "withheld": "recognition_question",
    }
    body = _request(turn, runtime=runtime).body
    assert _sent_urls(body) == [CAT]
    current = body["messages"][-1]["content"]
    assert current[-1] == {"type": "image_url", "image_url": {"url": CAT}}
    assert TIMELINE_IMAGES_TEXT not in json.dumps(body, ensure_ascii=False)


def test_a_reply_that_asks_something_else_keeps_the_other_history_images() -> None:
    turn = _asking_about_9105("@小织 它后来吃完火腿肠了吗")
    rendered = make_runtime().render(turn)
    # The quoted image is the current one, so it takes no history slot.
    assert rendered.vision_images == ("https://img.example.net/old.jpg",)
    body = _request(turn).body
    assert _sent_urls(body) == ["https://img.example.net/old.jpg", CAT]


def test_quoted_images_given_by_the_turn_win() -> None:
    given = "https://img.example.net/given.jpg"
    rendered = make_runtime().render(_asking_about_9105(quoted_message_images=(given,)))
    assert rendered.trace["messages"]["sources"]["quoted_message_images"] == "turn"
    assert rendered.trace["vision"]["current"] == [given]


def test_a_reply_to_a_message_without_images_adds_none() -> None:
    turn = _asking_about_9105()
    turn = attrs.evolve(turn, message=attrs.evolve(turn.message, reply_to="9107"))
    rendered = make_runtime().render(turn)
    # the quoted message is found among the recent messages: no later source is asked
    assert rendered.trace["messages"]["sources"]["quoted_message_images"] == "recent_messages"
    assert rendered.trace["messages"]["quoted_lookup"] == [
        {"source": "recent_messages", "result": "no_images"}
    ]
    assert rendered.trace["vision"]["current"] == []
    assert CAT in rendered.vision_images


def test_a_quoted_image_without_url_still_keeps_history_images_out() -> None:
    turn = _with_timeline_images(_asking_about_9105(), ("9105", (PLATFORM_ID,)))
    rendered = make_runtime().render(turn)
    assert rendered.trace["vision"]["withheld"] == "recognition_question"
    assert rendered.trace["vision"]["current"] == []
    assert _sent_urls(_request(turn).body) == []


# -- images only when the provider declares them ----------------------------------------------


def test_images_are_off_until_the_provider_declares_them() -> None:
    config = ProviderConfig()
    assert (config.supports_images, config.inline_images) == (False, True)
    spec, bare = ProviderSpec.from_config(config), ProviderSpec(api="openai_chat")
    assert (spec.supports_images, spec.inline_images) == (False, True)
    assert (bare.supports_images, bare.inline_images) == (False, True)


@pytest.mark.parametrize("api", list(ProviderApi))
def test_by_default_no_image_is_sent_or_downloaded(api: ProviderApi) -> None:
    fetched: list[str] = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            fetched.append(url)

    runtime = make_runtime(extra_plugins=(Fetcher(),))
    turn = _asking_about_9105("@小织 它后来吃完火腿肠了吗")
    request = build_provider_request(
        runtime, build_turn_context(runtime, turn, runtime.render(turn))
    )
    assert fetched == []
    assert "img.example.net" not in request.body_text()
    assert request.trace["supports_images"] is False


def test_a_declared_provider_downloads_the_images_before_the_request() -> None:
    fetched: list[str] = []

    class Fetcher:
        @hookimpl
        def fetch_image(self, url, limits):
            fetched.append(url)
            return FetchedImage(url=url, media_type="image/png", data=PNG_BYTES)

    config = Config(
        store=StoreConfig(backend="memory"), provider=ProviderConfig(supports_images=True)
    )
    runtime = Promptweave.from_config(
        config, environ={"PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD": "1"}, extra_plugins=(Fetcher(),)
    )
    turn = _asking_about_9105("@小织 它后来吃完火腿肠了吗")
    request = build_provider_request(
        runtime, build_turn_context(runtime, turn, runtime.render(turn))
    )
    assert fetched == [CAT, "https://img.example.net/old.jpg"]
    assert request.trace["images"] == {"sent": 2, "timeline": 1, "inline": True, "failed": []}
    assert "img.example.net" not in request.body_text()  # sent as data URLs
    assert request.body_text().count("data:image/png;base64,") == 2
