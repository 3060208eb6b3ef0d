"""What the built-in retrievers derive once per group and reuse turn after turn.

A group's expression pairs and strategies change rarely and are read on every turn. Each is turned
into an index once (kept by the retrieval store's ``cached``, so a write of the group's pairs or
strategies, by any process, rebuilds it on the next turn) and each turn scores only the records
that can match:

- :class:`ExpressionIndex`: the triggers as rapidfuzz compares them, and which triggers hold each
  character. ``WRatio`` of two texts that share no character other than spaces is at most
  :func:`space_bound`; every trigger that shares a character with the message, or whose bound
  reaches the minimum similarity, is compared exactly as before, and the others cannot reach it.
- :class:`StrategyIndex`: each strategy's terms, and which strategies hold each term; strategies
  sharing no term with the message score 0 and keep their order (most supported first).

The recalled pairs and strategies, their order and their scores are exactly those of comparing
every record (``docs/retrieval.md#caching``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import TypeVar

import attrs

from promptweave.items import LearningType
from promptweave.store.retrieval import BehaviorRecord, ExpressionPairRecord, RetrievalStore
from promptweave.text.scoring import score_text, text_terms

__all__ = [
    "ExpressionIndex",
    "StrategyIndex",
    "scope_cached",
    "space_bound",
    "terms_of",
]

T = TypeVar("T")

#: The terms of a text, remembered for texts seen again (summaries, facts, recent lines).
terms_of: Callable[[str], frozenset[str]] = functools.lru_cache(maxsize=4096)(text_terms)


def scope_cached(
    store: RetrievalStore,
    bot_id: str,
    group_id: str,
    key: Hashable,
    build: Callable[[], T],
    kinds: Collection[str],
) -> T:
    """``build()`` through the store's ``cached`` when it has one (the built-in stores do), else
    built on every call."""
    cached: Callable[..., T] | None = getattr(store, "cached", None)
    if cached is None:
        return build()
    return cached(bot_id, group_id, key, build, kinds=kinds)


def _spaces(text: str) -> int:
    # str.split() splits at the characters str.isspace() accepts, and drops them.
    return len(text) - sum(map(len, text.split()))


def space_bound(query: str, choice: str) -> float:
    """An upper bound of ``fuzz.WRatio(query, choice)`` (0–100) for two processed texts that
    share no character other than whitespace.

    Every part of ``WRatio`` compares the two texts, their sorted tokens or their token sets, or
    the shorter one with windows of the longer; only whitespace can be common to them, so each
    longest common subsequence is at most ``k``, the fewer of their whitespace characters. Then
    ``ratio`` is at most ``2k / (n + m)``; ``partial_ratio``, scaled by at most 0.9, at most
    ``2k / (min(n, m) + k)``; and the token ratios, in which whitespace only separates non-empty
    tokens, stay below 0.5 before their scaling by 0.95. With ``k = 0`` nothing is common and
    ``WRatio`` is 0.
    """
    return _bound(len(query), _spaces(query), len(choice), _spaces(choice))


def _bound(query_length: int, query_spaces: int, choice_length: int, choice_spaces: int) -> float:
    """:func:`space_bound` of texts of these lengths and whitespace counts."""
    common = min(query_spaces, choice_spaces)
    if not common:
        return 0.0
    shorter = min(query_length, choice_length)
    return 100 * max(
        2 * common / (query_length + choice_length),
        0.9 * 2 * common / (shorter + common),
        0.95 * 0.5,
    )


@attrs.frozen
class ExpressionIndex:
    """A group's direct pairs (newest first) ready for recall by similarity of their trigger.

    :param pairs: the pairs, in the store's order.
    :param triggers: each pair's trigger as rapidfuzz compares it (``utils.default_process``).
    :param holding: each non-whitespace character → the positions of the triggers holding it.
    :param spaced: the positions of the triggers that contain whitespace.
    :param spaces: the whitespace characters of each trigger of :attr:`spaced`, in its order.
    """

    pairs: tuple[ExpressionPairRecord, ...]
    triggers: tuple[str, ...]
    holding: Mapping[str, tuple[int, ...]]
    spaced: tuple[int, ...]
    spaces: tuple[int, ...]

    @classmethod
    def build(cls, pairs: Sequence[ExpressionPairRecord]) -> ExpressionIndex:
        triggers: tuple[str, ...] = ()
        if pairs:
            # rapidfuzz loads with the first group that has learned pairs, not at start-up
            # (docs/performance.md).
            from rapidfuzz import utils

            triggers = tuple(utils.default_process(pair.trigger) for pair in pairs)
        holding: dict[str, list[int]] = {}
        for position, trigger in enumerate(triggers):
            for character in set(trigger):
                if not character.isspace():
                    holding.setdefault(character, []).append(position)
        counted = [(i, _spaces(trigger)) for i, trigger in enumerate(triggers)]
        spaced = [(i, count) for i, count in counted if count]
        return cls(
            pairs=tuple(pairs),
            triggers=triggers,
            holding={character: tuple(found) for character, found in holding.items()},
            spaced=tuple(i for i, _count in spaced),
            spaces=tuple(count for _i, count in spaced),
        )

    def _candidates(self, query: str, cutoff: float) -> list[int]:
        """The positions of the triggers that may reach ``cutoff``, in order."""
        if cutoff <= 0:
            return list(range(len(self.triggers)))
        found: set[int] = set()
        for character in set(query):
            found.update(self.holding.get(character, ()))
        query_spaces = _spaces(query)
        if query_spaces:
            triggers, length = self.triggers, len(query)
            found.update(
                i
                for i, spaces in zip(self.spaced, self.spaces, strict=True)
                if i not in found
                and _bound(length, query_spaces, len(triggers[i]), spaces) >= cutoff
            )
        return sorted(found)

    def recall(self, text: str, *, limit: int, cutoff: float) -> list[tuple[int, float]]:
        """The positions and ``WRatio`` similarities (0–100) of the at most ``limit`` pairs
        whose trigger is most similar to ``text``, at least ``cutoff``: best first, ties in the
        pairs' order; what ``process.extract`` gives over every trigger."""
        if not self.triggers:
            return []
        from rapidfuzz import fuzz, process, utils

        query = utils.default_process(text)
        candidates = self._candidates(query, cutoff)
        found = process.extract(
            query,
            [self.triggers[i] for i in candidates],
            scorer=fuzz.WRatio,
            processor=None,
            limit=limit,
            score_cutoff=cutoff,
        )
        return [(candidates[index], similarity) for _choice, similarity, index in found]


@attrs.frozen
class _Ranked:
    """The strategies of one learning type: their terms, where each term occurs, and their
    order when nothing matches (most supported first, then the store's order)."""

    records: tuple[BehaviorRecord, ...]
    terms: tuple[frozenset[str], ...]
    holding: Mapping[str, tuple[int, ...]]
    by_support: tuple[int, ...]


@attrs.frozen
class StrategyIndex:
    """A group's pick-up strategies ready for ranking against a message.

    :param kinds: per learning type, its strategies in the store's order.
    """

    kinds: Mapping[LearningType, _Ranked]

    @classmethod
    def build(cls, records: Sequence[BehaviorRecord]) -> StrategyIndex:
        kinds = {}
        for learning_type in LearningType:
            own = tuple(record for record in records if record.learning_type is learning_type)
            terms = tuple(text_terms(f"{record.scene} {record.action}") for record in own)
            holding: dict[str, list[int]] = {}
            for position, found in enumerate(terms):
                for term in found:
                    holding.setdefault(term, []).append(position)
            kinds[learning_type] = _Ranked(
                records=own,
                terms=terms,
                holding={term: tuple(found) for term, found in holding.items()},
                by_support=tuple(
                    sorted(range(len(own)), key=lambda position: -own[position].support)
                ),
            )
        return cls(kinds=kinds)

    def rank(
        self, learning_type: LearningType, terms: Sequence[str], limit: int
    ) -> list[tuple[float, BehaviorRecord]]:
        """The ``limit`` best strategies of ``learning_type``: by the score of their scene and
        action against ``terms`` (:func:`promptweave.text.scoring.score_text`), then by support, then in the
        store's order."""
        ranked = self.kinds[learning_type]
        if not ranked.records:
            return []
        sharing: set[int] = set()
        holding = ranked.holding
        for term in terms:
            found = holding.get(term)
            if found:
                sharing.update(found)
        scored = sorted(
            ((score_text(terms, ranked.terms[position])[0], position) for position in sharing),
            key=lambda found: (-found[0], -ranked.records[found[1]].support, found[1]),
        )
        best: list[tuple[float, BehaviorRecord]] = [
            (score, ranked.records[position]) for score, position in scored[:limit]
        ]
        for position in ranked.by_support:
            if len(best) >= limit:
                break
            if position not in sharing:
                best.append((0.0, ranked.records[position]))
        return best
