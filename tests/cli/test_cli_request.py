"""``promptweave render --format openai|responses|anthropic`` and ``--previous``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support_turn_context import EXAMPLES

from promptweave.cli.main import cli

FIRST = str(EXAMPLES / "at_question.json")
FOLLOWUP = str(EXAMPLES / "at_question_followup.json")


@pytest.fixture
def run(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROMPTWEAVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PROMPTWEAVE_CONFIG", raising=False)
    (tmp_path / "promptweave.toml").write_text('[store]\nbackend = "memory"\n', encoding="utf-8")

    def invoke(*args):
        return CliRunner().invoke(cli, ["render", *args], catch_exceptions=False)

    return invoke


@pytest.mark.parametrize(
    ("fmt", "keys"),
    [
        ("openai", ["model", "messages", "max_tokens", "prompt_cache_key"]),
        ("responses", ["model", "instructions", "input", "max_output_tokens", "prompt_cache_key"]),
        ("anthropic", ["model", "max_tokens", "system", "messages"]),
    ],
)
def test_render_prints_the_exact_request_body(run, fmt, keys):
    result = run(FIRST, "--format", fmt)
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert list(body) == keys
    assert result.stdout.strip() == json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def test_render_previous_turn_reports_the_prefix_on_stderr(run):
    result = run(FOLLOWUP, "--format", "anthropic", "--previous", FIRST)
    assert result.exit_code == 0
    json.loads(result.stdout)
    line = next(x for x in result.stderr.splitlines() if x.startswith("prefix: "))
    report = json.loads(line.removeprefix("prefix: "))
    assert report["first_difference"] == "section group_timeline"
    assert 0 < report["common_prefix_bytes"] < report["request_bytes"]


def test_render_previous_body_file_is_compared_as_is(run, tmp_path):
    body = run(FIRST, "--format", "openai").stdout
    (tmp_path / "previous.json").write_text(body, encoding="utf-8")
    result = run(FIRST, "--format", "json", "--previous", str(tmp_path / "previous.json"))
    data = json.loads(result.stdout)
    assert data["request"]["prefix"]["common_prefix_bytes"] == len(body.strip().encode())
    assert data["turn_context"]["system_prompt"]["status"] == "built"


def test_render_text_shows_turn_context_and_prefix(run):
    result = run(FOLLOWUP, "--previous", FIRST)
    assert "==== turn context ====" in result.stdout
    assert '"status": "reused"' in result.stdout
    assert "==== prefix ====" in result.stdout


def test_render_previous_must_be_readable_json(run, tmp_path):
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    result = CliRunner().invoke(cli, ["render", FIRST, "--previous", str(tmp_path / "bad.json")])
    assert result.exit_code == 2
    assert "invalid JSON" in result.stderr


IMAGE_QUESTION = str(EXAMPLES / "image_question.json")
VISION_CONFIG = str(EXAMPLES.parent / "vision.toml")


def _image_urls(body):
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]


def test_render_sends_images_only_when_the_provider_declares_them(run):
    text_only = json.loads(run(IMAGE_QUESTION, "--format", "openai").stdout)
    assert _image_urls(text_only) == []
    assert "img.example.net" not in json.dumps(text_only)
    assert text_only["messages"][-1]["content"].endswith("@小织 这是什么猫\n[图片]")
    declared = json.loads(
        run(IMAGE_QUESTION, "--config", VISION_CONFIG, "--format", "openai").stdout
    )
    # The quoted photo is the image asked about; the older store-front photo stays out.
    assert _image_urls(declared) == ["https://img.example.net/cat-1.jpg"]
    assert declared["messages"][-1]["content"][-1]["image_url"]["url"].endswith("cat-1.jpg")


def test_render_json_traces_the_quoted_image_and_the_provider_default(run):
    data = json.loads(run(IMAGE_QUESTION, "--format", "json").stdout)
    assert data["trace"]["messages"]["sources"]["quoted_message_images"] == "recent_messages"
    assert data["trace"]["vision"] == {
        "current": ["https://img.example.net/cat-1.jpg"],
        "images": [],
        "withheld": "recognition_question",
    }
    assert data["request"]["supports_images"] is False
    assert data["request"]["images"] == {"sent": 0, "timeline": 0, "inline": True, "failed": []}


AMBIENT = str(EXAMPLES / "ambient_remark.json")


@pytest.mark.parametrize("fmt", ["openai", "responses", "anthropic"])
def test_render_refuses_a_request_body_for_a_turn_the_bot_stays_silent_on(run, fmt):
    result = CliRunner().invoke(cli, ["render", AMBIENT, "--format", fmt])
    assert (result.exit_code, result.stdout) == (3, "")
    assert result.stderr == (
        f"Error: {AMBIENT}: the routing decided to pass (necessity_below_threshold): the bot "
        "stays silent and sends nothing to the model; --force prints the request anyway\n"
    )


def test_render_names_the_canned_phrase_of_a_low_engagement_pass(run, tmp_path):
    turn = json.loads((EXAMPLES / "ambient_remark.json").read_text(encoding="utf-8"))
    turn["message"]["text"] = "哈哈哈哈"
    path = tmp_path / "haha.json"
    path.write_text(json.dumps(turn, ensure_ascii=False), encoding="utf-8")
    result = CliRunner().invoke(cli, ["render", str(path), "--format", "openai", "--seed", "1"])
    assert result.exit_code == 3
    assert "the bot sends the canned phrase '确实' without the model" in result.stderr


def test_render_force_prints_the_body_of_a_pass_turn(run):
    result = run(AMBIENT, "--format", "openai", "--force")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["messages"][-1]["role"] == "user"


def test_render_pretty_indents_the_same_body(run):
    compact = run(FIRST, "--format", "anthropic").stdout
    pretty = run(FIRST, "--format", "anthropic", "--pretty").stdout
    assert json.loads(pretty) == json.loads(compact)
    assert pretty.startswith('{\n  "model": ')
    assert "【安全约束】" in pretty


@pytest.mark.parametrize("flag", ["--pretty", "--force"])
def test_pretty_and_force_are_usage_errors_outside_the_body_formats(flag):
    result = CliRunner().invoke(cli, ["render", FIRST, flag])
    assert result.exit_code == 2
    assert f"Error: {flag} applies to --format openai/responses/anthropic only, not text" in (
        result.output
    )
