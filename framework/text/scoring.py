"""How retrieval matches text: terms, the index form of a text, and the score of a hit.

Chinese has no spaces, so a *term* is a character bigram of every run of CJK (or other non-ASCII)
letters, and a whole lowercase word of every ASCII run; most Chinese words are two characters
long, so bigrams match words whatever their neighbours are. The SQLite store indexes a text's
terms as space-separated tokens in an FTS5 table with the ``trigram`` tokenizer: a bigram is
written ``桌游#``, which is exactly one trigram, so ``"桌游#"`` matches the token ``桌游`` and nothing
else; a word is written `` help `` and matched as that phrase. FTS5's ``bm25`` weighs rare shared
terms above common ones.

The score (``docs/retrieval.md``, "Scoring"): the rarest query terms (at most
:data:`MAX_MATCH_TERMS`) pick candidates through FTS5, ``bm25`` orders them, then each candidate
gets

    score = matched / min(query terms, text terms)  ×  min(1, matched / 2)

``matched`` being the number of distinct query terms found in the text. The first factor (the
overlap coefficient) is 1.0 when the shorter side is wholly contained in the longer one, so a
short memory inside a long message and a short question inside a long document both score high;
the second halves hits that rest on a single shared term. Scores lie in [0, 1] and do not depend on
the size of the corpus, so a minimum score means the same for every group.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "MAX_MATCH_TERMS",
    "MAX_QUERY_TERMS",
    "STOP_TERMS",
    "fts_query",
    "index_text",
    "index_token",
    "normalize_query",
    "query_terms",
    "score_counts",
    "score_text",
    "text_terms",
]

#: A very long message contributes at most this many distinct terms to a search.
MAX_QUERY_TERMS = 64
#: The full-text index is asked for texts sharing at most this many of the query's rarest terms;
#: common terms cost the most to look up and tell the least (every term still counts in the
#: score).
MAX_MATCH_TERMS = 8

#: Bigrams so common in chat that sharing them says nothing about the topic.
STOP_TERMS: frozenset[str] = frozenset(
    {
        "我们", "你们", "他们", "她们", "什么", "这个", "那个", "一个", "就是", "还是", "可以",
        "没有", "不是", "知道", "觉得", "现在", "时候", "真的", "已经", "一下", "有点", "怎么",
        "这样", "那样", "然后", "所以", "因为", "但是", "的话", "是不", "了吗", "的时",
        "吗我", "了我", "我的", "你的", "他的", "是的", "有没", "大家", "自己", "一直", "一样",
    }
)  # fmt: skip

# ASCII runs become words; runs of other letters (CJK…) become bigrams.
_RUNS = re.compile(r"[0-9a-z]+|[^\W0-9a-z_]+")
# A mention (``@小织``) names the addressee, not the topic.
_MENTION = re.compile(r"@\S+(?=\s)")
_CQ_CODE = re.compile(r"\[CQ:[^\[\]]*\]")


def normalize_query(text: str, self_names: Iterable[str] = ()) -> str:
    """The message as a search query: CQ codes and @-mentions of the bot (``self_names``)
    removed, whitespace collapsed. Other ``@name`` words are removed only when a space ends
    them: Chinese has no word boundary, so ``@小织今晚几点`` keeps its question."""
    query = _CQ_CODE.sub(" ", text)
    for name in sorted(self_names, key=len, reverse=True):
        if name:
            query = query.replace(f"@{name}", " ")
    return " ".join(_MENTION.sub(" ", query).split())


#: Texts up to this long (chat lines) have their terms remembered (:func:`_terms`).
REMEMBERED_CHARS = 400


def _terms(text: str) -> tuple[str, ...]:
    """The terms of ``text`` in order, repeats included. A chat line's are remembered for the
    lines of the last turns: the message searched for in one turn is a recent group line, read
    for events, in the next ones."""
    return _recent_terms(text) if len(text) <= REMEMBERED_CHARS else _find_terms(text)


def _find_terms(text: str) -> tuple[str, ...]:
    terms: list[str] = []
    for run in _RUNS.findall(text.casefold()):
        if len(run) < 2:
            continue
        if run.isascii():
            terms.append(run)
        else:
            # Each character joined to the next: the run's bigrams, in order.
            terms.extend(map(operator.add, run, run[1:]))
    return tuple(terms)


_recent_terms = functools.lru_cache(maxsize=1024)(_find_terms)


def text_terms(text: str) -> frozenset[str]:
    """The distinct terms of a stored text (stop terms included: they only ever miss)."""
    return frozenset(_terms(text))


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct terms of a query, in order, without stop terms, at most
    :data:`MAX_QUERY_TERMS`."""
    found = dict.fromkeys(itertools.filterfalse(_is_stop_term, _terms(normalize_query(text))))
    return tuple(found)[:MAX_QUERY_TERMS]


_is_stop_term = STOP_TERMS.__contains__


def index_token(term: str) -> str:
    """How a term is written in the index (and looked up): ``桌游#`` (one trigram) for a bigram,
    `` help `` (a phrase between spaces) for a word."""
    return f" {term} " if term.isascii() else f"{term}#"


def index_text(text: str) -> str:
    """The form a text is indexed in: its distinct terms' tokens, separated and surrounded by
    spaces."""
    terms = dict.fromkeys(_terms(text))
    return f" {' '.join(index_token(term) for term in terms)} " if terms else ""


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 ``MATCH`` expression finding texts that share any of ``terms``."""
    return " OR ".join('"' + index_token(term).replace('"', '""') + '"' for term in terms)


def score_text(terms: Collection[str], text_term_set: Collection[str]) -> tuple[float, int]:
    """Score a text against query terms.

    :param terms: the query's terms (:func:`query_terms`).
    :param text_term_set: the text's terms (:func:`text_terms`).
    :returns: ``(score, matched)``; the score is in [0, 1], 0 when nothing matched.
    """
    if not terms or not text_term_set:
        return 0.0, 0
    matched = sum(map(text_term_set.__contains__, terms))
    if not matched:
        return 0.0, 0
    return score_counts(matched, len(terms), len(text_term_set)), matched


def score_counts(matched: int, query_terms: int, text_terms: int) -> float:
    """The score of :func:`score_text` from the counts: ``matched`` of the ``query_terms``
    distinct query terms found among the ``text_terms`` distinct terms of a text (all > 0)."""
    overlap = matched / min(query_terms, text_terms)
    return round(min(1.0, overlap) * min(1.0, matched / 2), 4)
