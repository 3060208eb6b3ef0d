"""Compression safety: re-anchoring, the preflight gate, the progress rule, the pass limit."""

from __future__ import annotations

import pytest

from promptweave import PromptMessage
from promptweave.text.tokens import COUNTED, ESTIMATED, TokenTally, estimate_tokens
from promptweave.turn_context.preflight import (
    compression_made_progress,
    default_compress_messages,
    estimate_messages_tokens_rough,
    reanchor_current_turn_user_idx,
    run_preflight,
    should_run_preflight_estimate,
)


def user(text: str, source: str = "history", **kwargs) -> PromptMessage:
    return PromptMessage(role="user", content=text, source=source, **kwargs)


def bot(text: str) -> PromptMessage:
    return PromptMessage(role="assistant", content=text)


# -- re-anchoring ------------------------------------------------------------------------------


def test_reanchor_finds_the_last_exact_match_from_the_end():
    rows = [user("在吗"), bot("在"), user("在吗"), bot("怎么了"), user("周六几点")]
    assert reanchor_current_turn_user_idx(rows, "在吗") == 2


def test_reanchor_falls_back_to_the_last_user_originated_row():
    rows = [user("在吗"), bot("在"), user("周六几点（合并后）"), bot("七点")]
    assert reanchor_current_turn_user_idx(rows, "周六几点") == 2


def test_reanchor_never_lands_on_a_summary_or_other_synthetic_row():
    rows = [user("周六几点"), bot("七点"), user("【此前对话摘要】聊了桌游局", source="summary")]
    assert reanchor_current_turn_user_idx(rows, "不存在") == 0
    rows = [user("【此前对话摘要】周六几点", source="summary"), bot("七点")]
    assert reanchor_current_turn_user_idx(rows, "【此前对话摘要】周六几点") == -1


def test_reanchor_returns_minus_one_without_user_rows():
    assert reanchor_current_turn_user_idx([bot("好")], "x") == -1
    assert reanchor_current_turn_user_idx([], "x") == -1


# -- the gate ------------------------------------------------------------------------------------


def test_gate_opens_on_more_messages_than_the_protected_ones():
    rows = [user(f"第{i}句") for i in range(25)]
    assert should_run_preflight_estimate(rows, 3, 20, threshold_tokens=10**9)
    assert not should_run_preflight_estimate(rows[:24], 3, 20, threshold_tokens=10**9)


def test_gate_opens_for_few_but_huge_messages():
    rows = [user("长" * 40_000), bot("好")]
    # Each text on its own: a CJK character 0.8 tokens, other text four characters a token.
    estimate = 1 + 32_000 + 3 + 1
    assert estimate_messages_tokens_rough(rows) == estimate
    assert should_run_preflight_estimate(rows, 3, 20, threshold_tokens=estimate)
    assert not should_run_preflight_estimate(rows, 3, 20, threshold_tokens=estimate + 1)


def test_estimate_counts_images_flat_never_as_their_bytes():
    inline = "data:image/png;base64," + "A" * 1_000_000
    rows = [user("看图", images=(inline, "https://img.example.net/cat.jpg"))]
    text = estimate_tokens("user") + estimate_tokens("看图")
    assert estimate_messages_tokens_rough(rows) == text + 2 * 1500
    assert estimate_messages_tokens_rough(rows, image_token_cost=100) == text + 200


def test_estimate_counts_the_sidecar_that_is_sent_and_durable_parts():
    rows = [user("短", api_content="短" + "x" * 400, parts=("y" * 40,))]
    assert estimate_messages_tokens_rough(rows) == 1 + (1 + (400 + 3) // 4) + 10


def test_a_tokenizer_counts_instead_of_the_estimate_and_the_result_says_so():
    rows = [user(f"第{i}句话") for i in range(30)]
    tally = TokenTally(count_one=lambda text: (len(text), COUNTED))
    _, result = run_preflight(
        rows,
        "系统",
        lambda r, n: r,
        protect_first=3,
        protect_last=20,
        threshold_tokens=10**6,
        count=tally,
        basis=lambda: tally.basis,
    )
    assert result.tokens == len("系统") + sum(len("user") + len(r.content) for r in rows)
    assert (result.basis, result.to_json()["tokens_basis"]) == (COUNTED, COUNTED)
    _, estimated = run_preflight(
        rows, "系统", lambda r, n: r, protect_first=3, protect_last=20, threshold_tokens=10**6
    )
    assert estimated.basis == ESTIMATED and estimated.tokens < result.tokens


# -- the progress rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("orig_len", "new_len", "orig_tokens", "new_tokens", "progress"),
    [
        (220, 220, 288_000, 183_000, True),  # rows unchanged, tokens cut by a third
        (100, 100, 100, 95, False),  # exactly 5% is not progress
        (100, 100, 100, 94, True),
        (10, 9, 100, 150, True),  # fewer rows counts even when tokens grew
        (10, 10, 0, 0, False),  # never progress from zero tokens
        (10, 11, 100, 50, True),
        (10, 10, 100, 120, False),
    ],
)
def test_compression_progress_rule(orig_len, new_len, orig_tokens, new_tokens, progress):
    assert compression_made_progress(orig_len, new_len, orig_tokens, new_tokens) is progress


# -- passes --------------------------------------------------------------------------------------


def _rows(count: int, size: int = 400) -> list[PromptMessage]:
    rows = []
    for i in range(count):
        rows.append(user(f"{i}" + "话" * size) if i % 2 == 0 else bot(f"{i}" + "答" * size))
    rows.append(user("现在几点", source="current"))
    return rows


def test_preflight_stops_after_three_passes_even_with_progress():
    calls = []

    def halve(rows, number):
        calls.append(number)
        return rows[len(rows) // 2 :]

    kept, result = run_preflight(
        _rows(64), "", halve, protect_first=0, protect_last=1, threshold_tokens=10
    )
    assert calls == [1, 2, 3]
    assert result.outcome == "max_passes"
    assert len(kept) == 9  # 65 -> 33 -> 17 -> 9


def test_preflight_stops_at_the_first_pass_without_progress():
    calls = []

    def shave(rows, number):
        calls.append(number)
        return rows if number > 1 else rows[1:]

    kept, result = run_preflight(
        _rows(40), "", shave, protect_first=0, protect_last=1, threshold_tokens=10
    )
    assert calls == [1, 2]
    assert result.outcome == "no_progress"
    assert [p.progress for p in result.passes] == [True, False]
    assert len(kept) == 40  # the progressing pass is kept


def test_preflight_stops_once_under_the_threshold():
    rows = _rows(30)
    kept, result = run_preflight(
        rows, "", lambda r, n: r[-3:], protect_first=0, protect_last=3, threshold_tokens=2_000
    )
    assert result.outcome == "compressed"
    assert len(result.passes) == 1
    assert kept == rows[-3:]


def test_preflight_skips_when_the_gate_is_closed_and_reports_under_threshold():
    untouched = [user("你好", source="current")]
    kept, result = run_preflight(
        untouched, "系统", lambda r, n: [], protect_first=3, protect_last=20, threshold_tokens=100
    )
    assert (kept, result.outcome, result.estimated) == (untouched, "skipped", False)
    rows = _rows(30, size=1)
    kept, result = run_preflight(
        rows, "", lambda r, n: [], protect_first=3, protect_last=20, threshold_tokens=10**6
    )
    assert (kept, result.outcome, result.estimated) == (rows, "under_threshold", True)


# -- the built-in compressor ---------------------------------------------------------------------


def test_default_compressor_strips_earlier_images_and_drops_their_sidecars():
    rows = [
        user("看猫", images=("https://img.example.net/cat.jpg",), api_content="看猫\n\n备注"),
        bot("好可爱"),
        user("这是谁", source="current", images=("https://img.example.net/dog.jpg",)),
    ]
    out = default_compress_messages(rows, 1, protect_first=0, protect_last=1)
    assert (out[0].content, out[0].images, out[0].api_content) == ("看猫\n[图片]", (), None)
    assert out[2] == rows[2]  # the current message keeps its image


def test_default_compressor_drops_the_oldest_half_of_the_unprotected_middle():
    rows = _rows(10)
    out = default_compress_messages(rows, 2, protect_first=2, protect_last=4)
    assert out[:2] == rows[:2] and out[-4:] == rows[-4:]
    assert len(out) == len(rows) - 2


def test_default_compressor_cuts_the_longest_earlier_row_when_all_are_protected():
    rows = [user("长" * 400), bot("好"), user("然后呢", source="current")]
    out = default_compress_messages(rows, 3, protect_first=3, protect_last=20)
    assert out[0].content == "长" * 100 + "…（已截断）"
    assert out[1:] == rows[1:]
    assert default_compress_messages(rows[1:], 3, protect_first=3, protect_last=20) == rows[1:]
