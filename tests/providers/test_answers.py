"""Reading a provider's response: text, tool calls and token usage, for each format.

The realistic bodies are shaped as in each provider's API reference (and checked against the
official SDKs' response models); the malformed ones must never raise.
"""

from __future__ import annotations

import anthropic.types
import openai.types.chat
import openai.types.responses
import pytest

from promptweave import ProviderApi, parse_answer
from promptweave.providers.answers import ProviderAnswer
from promptweave.providers.exchange import ToolCall, Usage

#: Chat Completions, a plain reply whose prompt was mostly served from the cache.
CHAT_REPLY = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "要的，周六还是老地方。",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 2113,
        "completion_tokens": 14,
        "total_tokens": 2127,
        "prompt_tokens_details": {
            "cached_tokens": 1920,
            "cache_write_tokens": 0,
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}

#: Chat Completions, two parallel tool calls and no text.
CHAT_TOOL_CALLS = {
    "id": "chatcmpl-AxNn7b",
    "object": "chat.completion",
    "created": 1741570290,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_12345xyz",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"杭州"}'},
                    },
                    {
                        "id": "call_67890abc",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": "{}"},
                    },
                ],
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 300,
        "completion_tokens": 40,
        "total_tokens": 340,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    },
}

#: DeepSeek's Chat Completions usage: the cache hit and miss counts beside the OpenAI fields.
DEEPSEEK_USAGE = {
    "prompt_tokens": 1200,
    "completion_tokens": 30,
    "total_tokens": 1230,
    "prompt_cache_hit_tokens": 1152,
    "prompt_cache_miss_tokens": 48,
}

#: Responses, a message item and a function call item.
RESPONSES_REPLY = {
    "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "max_output_tokens": None,
    "model": "gpt-4.1-2025-04-14",
    "output": [
        {
            "type": "message",
            "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "我查一下天气。", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_12345xyz",
            "call_id": "call_12345xyz",
            "name": "get_weather",
            "arguments": '{"city":"杭州"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
    "usage": {
        "input_tokens": 1836,
        "input_tokens_details": {"cached_tokens": 1792, "cache_write_tokens": 44},
        "output_tokens": 87,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 1923,
    },
    "user": None,
    "metadata": {},
}

#: Anthropic Messages, text then a tool_use block; the prompt was partly read from the cache
#: and partly written to it.
ANTHROPIC_REPLY = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "text", "text": "我查一下天气。"},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"city": "杭州", "unit": "celsius"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 21,
        "cache_creation_input_tokens": 188,
        "cache_read_input_tokens": 1800,
        "output_tokens": 393,
        "cache_creation": {"ephemeral_5m_input_tokens": 188, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    },
}


def test_realistic_bodies_are_what_the_official_sdks_read():
    # Guards the fixtures above: each is a valid response for its SDK's response model.
    assert openai.types.chat.ChatCompletion.model_validate(CHAT_REPLY).usage.prompt_tokens == 2113
    chat = openai.types.chat.ChatCompletion.model_validate(CHAT_TOOL_CALLS)
    assert chat.choices[0].message.tool_calls[1].function.name == "get_time"
    response = openai.types.responses.Response.model_validate(RESPONSES_REPLY)
    assert response.usage.input_tokens_details.cached_tokens == 1792
    message = anthropic.types.Message.model_validate(ANTHROPIC_REPLY)
    assert message.usage.cache_read_input_tokens == 1800


def test_chat_reply_text_and_cached_prompt_tokens():
    answer = parse_answer(ProviderApi.OPENAI_CHAT, CHAT_REPLY)
    assert answer == ProviderAnswer(
        text="要的，周六还是老地方。",
        usage=Usage(
            prompt_tokens=2113, output_tokens=14, cached_tokens=1920, cache_creation_tokens=0
        ),
    )


def test_chat_tool_calls_keep_their_ids_and_raw_arguments():
    answer = parse_answer(ProviderApi.OPENAI_CHAT, CHAT_TOOL_CALLS)
    assert answer.text is None
    assert answer.tool_calls == (
        ToolCall(id="call_12345xyz", name="get_weather", arguments='{"city":"杭州"}'),
        ToolCall(id="call_67890abc", name="get_time", arguments="{}"),
    )
    assert answer.usage == Usage(prompt_tokens=300, output_tokens=40, cached_tokens=0)


def test_deepseek_cache_hits_count_as_cached_tokens():
    body = {**CHAT_REPLY, "usage": DEEPSEEK_USAGE}
    assert parse_answer("openai_chat", body).usage == Usage(
        prompt_tokens=1200, output_tokens=30, cached_tokens=1152
    )
    both = {**DEEPSEEK_USAGE, "prompt_tokens_details": {"cached_tokens": 1100}}
    assert parse_answer("openai_chat", {"usage": both}).usage.cached_tokens == 1100


def test_chat_content_given_as_text_parts_is_joined():
    body = {"choices": [{"message": {"content": [{"type": "text", "text": "要"}, {"text": "x"}]}}]}
    body["choices"][0]["message"]["content"].append({"type": "text", "text": "的"})
    assert parse_answer("openai_chat", body).text == "要的"


def test_responses_text_function_calls_and_usage():
    answer = parse_answer(ProviderApi.OPENAI_RESPONSES, RESPONSES_REPLY)
    assert answer.text == "我查一下天气。"
    # The call id is call_id, which function_call_output must name; not the item id fc_….
    assert answer.tool_calls == (
        ToolCall(id="call_12345xyz", name="get_weather", arguments='{"city":"杭州"}'),
    )
    assert answer.usage == Usage(
        prompt_tokens=1836, output_tokens=87, cached_tokens=1792, cache_creation_tokens=44
    )


def test_anthropic_prompt_tokens_add_the_cache_reads_and_writes():
    answer = parse_answer(ProviderApi.ANTHROPIC, ANTHROPIC_REPLY)
    assert answer.text == "我查一下天气。"
    assert answer.tool_calls == (
        ToolCall(
            id="toolu_01A09q90qw90lq917835lq9",
            name="get_weather",
            arguments='{"city":"杭州","unit":"celsius"}',
        ),
    )
    assert answer.usage == Usage(
        prompt_tokens=21 + 1800 + 188,
        output_tokens=393,
        cached_tokens=1800,
        cache_creation_tokens=188,
    )


def test_anthropic_usage_without_cache_fields():
    body = {"content": [], "usage": {"input_tokens": 10, "output_tokens": 2}}
    answer = parse_answer("anthropic", body)
    assert (answer.text, answer.tool_calls) == (None, ())
    assert answer.usage == Usage(prompt_tokens=10, output_tokens=2)


GARBAGE = [
    None,
    "not json",
    42,
    [],
    {},
    {"choices": "x", "output": 3, "content": {"type": "text"}, "usage": []},
    {"choices": [None], "output": [None, "x"], "content": [None, 7]},
    {"choices": [{"message": {"content": 5, "tool_calls": [None, {"function": "x"}]}}]},
    {"choices": [{"message": {"tool_calls": [{"id": 3, "function": {"name": ""}}]}}]},
    {"output": [{"type": "function_call", "name": None}], "content": [{"type": "tool_use"}]},
    {"usage": {"prompt_tokens": "12", "input_tokens": -1, "output_tokens": True}},
    {"usage": {"prompt_tokens_details": "x", "input_tokens_details": [1]}},
]


@pytest.mark.parametrize("api", list(ProviderApi))
@pytest.mark.parametrize("body", GARBAGE, ids=range(len(GARBAGE)))
def test_malformed_bodies_never_raise_and_give_nothing_invented(api, body):
    answer = parse_answer(api, body)
    assert answer == ProviderAnswer()


def test_malformed_parts_are_skipped_and_the_rest_is_read():
    chat = {
        "choices": [
            {
                "message": {
                    "content": "好",
                    "tool_calls": [
                        {"function": {"name": "lookup", "arguments": {"q": "桌游"}}},
                        {"id": "call_1", "function": {"arguments": "{}"}},
                        {"id": "call_2", "function": {"name": "ping"}},
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": "many"},
    }
    answer = parse_answer("openai_chat", chat)
    assert answer.text == "好"
    # A call without a name is dropped; a missing id stays empty; arguments given as an object
    # are written as JSON text; missing arguments are an empty object.
    assert answer.tool_calls == (
        ToolCall(id="", name="lookup", arguments='{"q":"桌游"}'),
        ToolCall(id="call_2", name="ping", arguments="{}"),
    )
    assert answer.usage == Usage(prompt_tokens=9)
    truncated = {"content": [{"type": "text", "text": "半"}, {"type": "tool_use", "id": "t"}]}
    assert parse_answer("anthropic", truncated) == ProviderAnswer(text="半")


def test_unknown_format_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown provider format 'gemini'"):
        parse_answer("gemini", {})
