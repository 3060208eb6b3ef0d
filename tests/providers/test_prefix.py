"""Prefix stability: labelled segments, the byte-identical prefix, the trace."""

from __future__ import annotations

import attrs
from support_turn_context import example_turn, later, make_runtime

from promptweave import ProviderApi, build_provider_request, build_turn_context
from promptweave.providers.exchange import ProviderSpec
from promptweave.providers.prefix import canonical_json, compare_request_prefix, labelled_segments


def _request(runtime, turn, api=ProviderApi.OPENAI_CHAT, **kwargs):
    context = build_turn_context(runtime, turn, runtime.render(turn))
    return build_provider_request(runtime, context, ProviderSpec(api=api, model="m"), **kwargs)


def test_segments_concatenate_to_the_exact_body():
    for api in ProviderApi:
        request = _request(make_runtime(), example_turn(), api)
        assert "".join(piece for _, piece in request.segments) == canonical_json(request.body)
        labels = {label for label, _ in request.segments}
        assert {"section persona", "section current_time", "model"} <= labels


def test_a_body_with_unicode_and_escapes_is_split_exactly():
    body = {"a": 'x\n"y"', "messages": [{"role": "user", "content": "中文\t"}]}
    labels = {("a",): [("one", "x\n"), ("two", '"y"')]}
    segments = labelled_segments(body, labels)
    assert "".join(p for _, p in segments) == canonical_json(body)
    assert ("two", '\\"y\\"') in segments


def test_first_request_of_a_conversation_has_no_prefix_report():
    request = _request(make_runtime(), example_turn())
    assert request.prefix is None and request.trace["prefix"] is None


def test_identical_turn_is_a_full_prefix():
    runtime = make_runtime()
    first = _request(runtime, example_turn())
    second = _request(runtime, example_turn())
    assert second.prefix.common_prefix_bytes == len(first.body_bytes())
    assert second.prefix.first_difference is None
    assert second.trace["prefix"]["ratio"] == 1.0


def test_a_later_minute_differs_first_at_the_current_time_section():
    runtime = make_runtime()
    turn = attrs.evolve(example_turn(), recent_messages=())
    _request(runtime, turn)
    second = _request(runtime, later(turn, 1))
    assert second.prefix.first_difference == "section current_time"
    body = second.body_text()
    assert (
        body.encode()[: second.prefix.common_prefix_bytes]
        .decode()
        .endswith("本轮时间：2026-11-28 20:4")
    )


def test_record_prefix_false_compares_without_remembering():
    runtime = make_runtime()
    first = _request(runtime, example_turn())
    peek = _request(runtime, later(example_turn(), 5), record_prefix=False)
    again = _request(runtime, example_turn())
    assert peek.prefix.first_difference is not None
    assert again.prefix.common_prefix_bytes == len(first.body_bytes())


def test_compare_reports_extension_and_model_change():
    segments = [("model", '{"model":"a"'), ("message 0 (user)", ',"x":1}')]
    extended = compare_request_prefix(b'{"model":"a"', segments)
    assert (extended.common_prefix_bytes, extended.first_difference) == (12, None)
    changed = compare_request_prefix(b'{"model":"b","x":1}', segments)
    assert (changed.common_prefix_bytes, changed.first_difference) == (10, "model")


def test_a_requests_body_is_serialized_once_and_a_new_body_anew():
    request = _request(make_runtime(), example_turn())
    assert request.body_text() == canonical_json(request.body)
    assert request.body_bytes() is request.body_bytes()
    assert request.body_bytes() == canonical_json(request.body).encode()
    changed = attrs.evolve(request, body={**request.body, "model": "other"})
    assert changed.body_bytes() == canonical_json(changed.body).encode()
    assert changed.body_bytes() != request.body_bytes()
    # Equality is the value's, not the serialization's.
    assert attrs.evolve(request) == request


def _piece_by_piece(body, labels):
    """The segments as they were once made: every key, bracket and value a piece of its own."""
    import json

    from promptweave.providers.prefix import _escaped, _label_for

    out = []

    def emit(value, path):
        label = _label_for(path, body)
        if isinstance(value, dict):
            out.append((label, "{"))
            for number, (key, item) in enumerate(value.items()):
                prefix = "," if number else ""
                out.append((_label_for((*path, key), body), f"{prefix}{json.dumps(key)}:"))
                emit(item, (*path, key))
            out.append((label, "}"))
        elif isinstance(value, list | tuple):
            out.append((label, "["))
            for number, item in enumerate(value):
                if number:
                    out.append((_label_for((*path, number), body), ","))
                emit(item, (*path, number))
            out.append((label, "]"))
        elif isinstance(value, str) and path in labels:
            out.append((label, '"'))
            out.extend((piece_label, _escaped(piece)) for piece_label, piece in labels[path])
            out.append((label, '"'))
        else:
            out.append((label, json.dumps(value, ensure_ascii=False)))

    emit(body, ())
    return out


def _runs_of(segments):
    """Adjacent pieces of one label joined: what the prefix report and new bytes read."""
    runs = []
    for label, piece in segments:
        if runs and runs[-1][0] == label:
            runs[-1] = (label, runs[-1][1] + piece)
        else:
            runs.append((label, piece))
    return runs


def test_whole_subtrees_give_the_same_labelled_text_as_piece_by_piece():
    runtime = make_runtime()
    for api in ProviderApi:
        request = _request(runtime, example_turn(), api)
        assert _runs_of(request.segments) == _runs_of(
            _piece_by_piece(request.body, request.text_labels)
        )
    # A key that is not ASCII keeps its escaped piece (the subtree is not taken whole).
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "中文"}]}],
        "metadata": {"名字": "值", "n": [1, 2.5, None, True]},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    }
    assert _runs_of(labelled_segments(body, {})) == _runs_of(_piece_by_piece(body, {}))
    assert "".join(piece for _, piece in labelled_segments(body, {})) != canonical_json(body)
