from __future__ import annotations

import re
import sqlite3

import pytest

from promptweave.text import scoring
from promptweave.text.scoring import (
    MAX_QUERY_TERMS,
    fts_query,
    index_text,
    normalize_query,
    query_terms,
    score_text,
    text_terms,
)


def test_query_terms_are_cjk_bigrams_and_ascii_words_without_mentions_and_stop_terms():
    terms = query_terms("@小织 周六桌游 help 我们")
    assert terms == ("周六", "六桌", "桌游", "help")


def test_query_terms_are_capped_for_long_messages():
    text = "".join(chr(0x4E00 + i) for i in range(500))
    assert len(query_terms(text)) == MAX_QUERY_TERMS


def test_normalize_query_removes_mentions_and_collapses_space():
    assert normalize_query("@小织  周六\n还去吗") == "周六 还去吗"


def test_score_is_one_when_the_shorter_text_is_contained_in_the_longer():
    terms = query_terms("周六晚上桌游局还照常吗")
    score, matched = score_text(terms, text_terms("桌游局"))
    assert (score, matched) == (1.0, 2)


def test_score_halves_a_hit_resting_on_one_term():
    score, matched = score_text(query_terms("桌游"), text_terms("桌游"))
    assert (score, matched) == (0.5, 1)


def test_score_is_zero_without_shared_terms():
    assert score_text(query_terms("今天好冷"), text_terms("桌游局七点开始")) == (0.0, 0)


def test_indexed_terms_match_whole_bigram_tokens_through_the_trigram_tokenizer():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(terms, tokenize='trigram')")
    for text in ("账号绑定步骤", "我定了", "绑"):
        db.execute("INSERT INTO f VALUES (?)", (index_text(text),))
    found = db.execute("SELECT rowid FROM f WHERE f MATCH ?", (fts_query(["绑定"]),)).fetchall()
    assert found == [(1,)]
    # "定了" is a token of row 2 only; the bigram "我定" must not match across tokens of row 1.
    found = db.execute("SELECT rowid FROM f WHERE f MATCH ?", (fts_query(["定了"]),)).fetchall()
    assert found == [(2,)]


def test_fts_query_escapes_double_quotes():
    assert fts_query(['a"b', "桌游"]) == '" a""b " OR "桌游#"'


def test_query_text_drops_cq_codes_and_bot_mentions_but_keeps_glued_questions():
    from promptweave.text.scoring import normalize_query

    assert normalize_query("@小织今晚的桌游局几点开始？", ("小织",)) == "今晚的桌游局几点开始？"
    assert normalize_query("[CQ:image,file=a.jpg,url=https://x] @阿蒙 这是啥") == "这是啥"
    assert normalize_query("@织织 @小织 规则在哪", ("小织", "织织")) == "规则在哪"


@pytest.mark.parametrize(
    "text",
    [
        "周六晚上桌游局还照常吗",
        "Ｈｅｌｌｏ world 桌游 ok 2026年",
        "单字 a 好 b 的",
        "ß straße 桌",
        "桌" * 500 + "游戏",
        "",
    ],
)
def test_terms_of_short_and_long_texts_are_the_bigrams_and_words_in_order(text):
    folded = text.casefold()
    expected = []
    for run in re.findall(r"[0-9a-z]+|[^\W0-9a-z_]+", folded):
        if len(run) >= 2:
            expected += [run] if run.isascii() else [run[i : i + 2] for i in range(len(run) - 1)]
    assert list(scoring._terms(text)) == expected
    assert list(scoring._terms(text)) == expected  # remembered or not, the same
    assert text_terms(text) == frozenset(expected)
