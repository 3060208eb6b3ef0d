"""The per-group indexes of the built-in retrievers give what comparing every record gave."""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st
from rapidfuzz import fuzz, process, utils

from promptweave.builtin_plugins.retrieval_indexes import (
    ExpressionIndex,
    StrategyIndex,
    _spaces,
    space_bound,
)
from promptweave.items import LearningType
from promptweave.store.retrieval import BehaviorRecord, ExpressionPairRecord
from promptweave.store.retrieval_sqlite import _score_indexed
from promptweave.text.scoring import (
    index_text,
    index_token,
    query_terms,
    score_text,
    text_terms,
)

# Letters the query and the trigger never share, and what separates words once processed.
QUERY_LETTERS = "ab周六晚上桌游1"
CHOICE_LETTERS = "xyz地铁米线报表9"
SEPARATORS = " ，。？!～"


def processed(letters: str) -> st.SearchStrategy[str]:
    return st.text(alphabet=letters + SEPARATORS, max_size=40).map(utils.default_process)


@settings(max_examples=3000, deadline=None)
@given(query=processed(QUERY_LETTERS), choice=processed(CHOICE_LETTERS))
def test_wratio_of_texts_sharing_only_whitespace_stays_within_the_space_bound(query, choice):
    assert fuzz.WRatio(query, choice) <= space_bound(query, choice) + 1e-9


@settings(max_examples=300, deadline=None)
@given(
    query=processed(QUERY_LETTERS),
    choice=processed(CHOICE_LETTERS).filter(lambda text: " " not in text),
)
def test_texts_sharing_nothing_and_one_without_spaces_are_not_similar_at_all(query, choice):
    assert space_bound(query, choice) == 0
    assert fuzz.WRatio(query, choice) == 0


@settings(max_examples=500, deadline=None)
@given(text=st.text())
def test_whitespace_is_counted_as_str_isspace_counts_it(text):
    assert _spaces(text) == sum(1 for character in text if character.isspace())


def test_the_space_bound_is_reached_by_texts_made_of_separators():
    """Not a loose bound that could never matter: many spaces and few letters come close."""
    query, choice = utils.default_process("a，，，，b"), utils.default_process("x，，，，y")
    assert fuzz.WRatio(query, choice) >= 50
    assert space_bound(query, choice) >= fuzz.WRatio(query, choice)


TEXTS = st.text(alphabet="周六晚上桌游局地铁米线好的哈哈ok的了吗 ，。？!" + "Ab", max_size=16)


def _old_recall(
    pairs: list[ExpressionPairRecord], text: str, limit: int, cutoff: float
) -> list[tuple[int, float]]:
    found = process.extract(
        text,
        [pair.trigger for pair in pairs],
        scorer=fuzz.WRatio,
        processor=utils.default_process,
        limit=limit,
        score_cutoff=cutoff,
    )
    return [(index, similarity) for _trigger, similarity, index in found]


@settings(max_examples=600, deadline=None)
@given(
    triggers=st.lists(TEXTS.filter(str.strip), max_size=40),
    duplicates=st.lists(st.integers(0, 39), max_size=10),
    text=TEXTS,
    limit=st.integers(1, 6),
    cutoff=st.sampled_from([0.0, 10.0, 30.0, 47.5, 50.0, 60.0, 85.5, 100.0]),
)
def test_expression_recall_is_what_comparing_every_trigger_gave(
    triggers, duplicates, text, limit, cutoff
):
    triggers = triggers + [triggers[i] for i in duplicates if i < len(triggers)]
    pairs = [
        ExpressionPairRecord(bot_id="b", group_id="g", trigger=trigger, reply=f"r{i}")
        for i, trigger in enumerate(triggers)
    ]
    index = ExpressionIndex.build(pairs)
    assert index.recall(text, limit=limit, cutoff=cutoff) == _old_recall(pairs, text, limit, cutoff)


def test_expression_recall_compares_only_triggers_that_share_a_character():
    pairs = [
        ExpressionPairRecord(bot_id="b", group_id="g", trigger=trigger, reply="r")
        for trigger in ("快了", "好冷", "桌游局几点", "地铁站旁边")
    ]
    index = ExpressionIndex.build(pairs)
    assert index._candidates(utils.default_process("今晚桌游局"), 50.0) == [2]
    assert index.recall("今晚桌游局", limit=2, cutoff=50.0) == _old_recall(
        pairs, "今晚桌游局", 2, 50.0
    )


def _old_rank(
    records: list[BehaviorRecord], learning_type: LearningType, terms: tuple[str, ...], limit: int
) -> list[tuple[float, BehaviorRecord]]:
    ranked = sorted(
        (
            (score_text(terms, text_terms(f"{record.scene} {record.action}"))[0], record)
            for record in records
            if record.learning_type is learning_type
        ),
        key=lambda scored: (-scored[0], -scored[1].support),
    )
    return ranked[:limit]


def test_strategies_rank_as_when_every_strategy_was_scored():
    rng = random.Random(3)
    words = ["对方", "表达", "进展", "时候", "接话", "追问", "夸奖", "吐槽", "周六", "桌游"]
    for _ in range(200):
        records = [
            BehaviorRecord(
                bot_id="b",
                group_id="g",
                scene="".join(rng.sample(words, rng.randint(1, 3))),
                action="".join(rng.sample(words, rng.randint(1, 2))) + str(i),
                learning_type=rng.choice(list(LearningType)),
                support=rng.randint(1, 3),
            )
            for i in range(rng.randint(0, 30))
        ]
        # The store hands them most supported first.
        records.sort(key=lambda record: -record.support)
        index = StrategyIndex.build(records)
        terms = query_terms("".join(rng.sample(words, rng.randint(0, 4))))
        limit = rng.randint(0, 5)
        for learning_type in LearningType:
            assert index.rank(learning_type, terms, limit) == _old_rank(
                records, learning_type, terms, limit
            )


WORDY = st.text(alphabet="周六晚上桌游局地铁米线 abcz09#，。!?ß\u0130\u00e9ﬁ_-", max_size=40)


@settings(max_examples=2000, deadline=None)
@given(text=st.one_of(st.text(max_size=60), WORDY), query=st.one_of(st.text(max_size=30), WORDY))
def test_scoring_the_index_form_equals_scoring_the_terms_of_the_index_form(text, query):
    indexed = index_text(text)
    terms = query_terms(query)
    tokens = frozenset(index_token(term).strip() for term in terms)
    assert _score_indexed(tokens, indexed) == score_text(terms, text_terms(indexed))
