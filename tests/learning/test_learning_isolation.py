"""Nothing learned in one (bot, group) reaches another's list or prompt (``docs/learning.md``):
groups chatting at once through one live loop, two bots sharing a group id, and scopes whose ids
would run together at a ``:`` (bot ``1`` in group ``2:3``, bot ``1:2`` in group ``3``), on every
store backend."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest
from base_support import Clock
from learning_backends_support import (
    T0,
    Line,
    Scope,
    ScopeTransport,
    Site,
    catch_up,
    feed,
    learned,
    learning_config,
    open_site,
    shape,
    turn,
)
from runtime_fixtures import redis_prefix, redis_url

from promptweave import BotLoop
from promptweave.store.learned import LearnedItem
from promptweave.store.learned_retrieval import learned_id

__all__ = ["redis_prefix", "redis_url"]

#: Every chat's members have the same ids, so only the scope tells their teachings apart.
SCOPES = (
    Scope(
        bot_id="10001",
        group_id="20001",
        tag="a",
        base=1_000_000,
        lines=(
            Line("301", "阿蒙", "今天去爬山吗"),
            Line("302", "小林", "爬哪座山啊"),
            Line("301", "阿蒙", "小织记住，我叫阿蒙不叫阿猛"),
            Line("302", "小林", "香山红叶正好"),
            Line("303", "老王", "红叶拍照超好看"),
            Line("301", "阿蒙", "那就香山走起", quotes=3),
        ),
    ),
    Scope(
        bot_id="10001",
        group_id="20002",
        tag="b",
        base=2_000_000,
        lines=(
            Line("301", "老周", "晚上吃火锅吗"),
            Line("302", "大刘", "哪家火锅店啊"),
            Line("301", "老周", "小织记得，我叫老周不叫老邹"),
            Line("302", "大刘", "海底捞排队太久"),
            Line("303", "小美", "换家串串香吧"),
            Line("301", "老周", "串串香也行", quotes=4),
        ),
    ),
    Scope(
        bot_id="10003",
        group_id="20001",
        tag="c",
        base=3_000_000,
        lines=(
            Line("301", "阿布", "周末看电影吗"),
            Line("302", "小雨", "看哪部电影啊"),
            Line("301", "阿布", "小满记住，我叫阿布不叫阿步"),
            Line("302", "小雨", "科幻片最近很多"),
            Line("303", "大飞", "爆米花我来买"),
            Line("301", "阿布", "那我订电影票", quotes=4),
        ),
    ),
    Scope(
        bot_id="1",
        group_id="2:3",
        tag="d",
        base=4_000_000,
        lines=(
            Line("301", "大壮", "明天下雨吗"),
            Line("302", "二毛", "好像有雷阵雨"),
            Line("301", "大壮", "小织记住，我叫大壮不叫大状"),
            Line("302", "二毛", "记得带雨伞出门"),
            Line("303", "三妹", "雨衣比雨伞方便"),
            Line("301", "大壮", "雨衣我有两件", quotes=4),
        ),
    ),
    Scope(
        bot_id="1:2",
        group_id="3",
        tag="e",
        base=5_000_000,
        lines=(
            Line("301", "二丫", "股票涨了吗"),
            Line("302", "阿强", "今天全绿了"),
            Line("301", "二丫", "小织记住，我叫二丫不叫二鸭"),
            Line("302", "阿强", "基金也跌惨了"),
            Line("303", "小六", "割肉还是补仓"),
            Line("301", "二丫", "补仓摊低成本", quotes=4),
        ),
    ),
)
LATER = T0 + dt.timedelta(hours=1)


def _chat(site: Site, scopes: tuple[Scope, ...], *, pause_s: float) -> dict[str, set[str]]:
    """Every scope's chat at once through one live loop that learns in the background; then
    every learner catches up. :returns: each scope's message ids (its members' and its bot's)."""
    clock = Clock(T0)
    runtime = site.runtime(learning=learning_config(tick_s=0.005, min_batch=1), clock=clock)
    transports = {scope.tag: ScopeTransport(scope.base) for scope in scopes}

    async def run() -> None:
        loop = BotLoop(runtime=runtime, sleep=_no_pause)
        outcomes = await feed(
            loop, scopes, transports, range(len(scopes[0].lines)), clock=clock, pause_s=pause_s
        )
        await loop.aclose()
        assert [o.status for o in outcomes].count("replied") == len(scopes), outcomes

    asyncio.run(run())
    catch_up(runtime, LATER)
    return {
        scope.tag: {scope.message_id(i) for i in range(len(scope.lines))}
        | set(transports[scope.tag].delivered)
        for scope in scopes
    }


async def _no_pause(_seconds: float) -> None:
    return None


def _alone(scope: Scope, tmp_path: Path, request: pytest.FixtureRequest) -> list[LearnedItem]:
    """What the scope's chat alone teaches, on fresh in-memory stores, learned in one go."""
    site = open_site(request, "memory", tmp_path, f"alone-{scope.tag}")
    try:
        clock = Clock(T0)
        runtime = site.runtime(learning=learning_config(min_batch=1), clock=clock)
        transports = {scope.tag: ScopeTransport(scope.base)}

        async def run() -> None:
            loop = BotLoop(runtime=runtime, sleep=_no_pause, learn=False)
            await feed(loop, (scope,), transports, range(len(scope.lines)), clock=clock)
            await loop.aclose()

        asyncio.run(run())
        catch_up(runtime, LATER)
        return learned(runtime.stores.learned, scope.bot_id, scope.group_id)
    finally:
        site.close()


def _hit_texts(items: list[LearnedItem]) -> dict[str, str]:
    """Each item's id in the retrieval trace, and what a hit of it says (a pair's trigger and
    reply are both in its hit's text, a teaching is its text)."""
    return {learned_id(item): _hit_text(item) for item in items}


def _hit_text(item: LearnedItem) -> str:
    if item.kind == "expression_pair":
        return f"触发「{item.fields['trigger']}」时：{item.fields['reply']}"
    if item.kind == "teaching":
        return str(item.fields["text"])
    return "rhythm baseline"


def _texts(items: list[LearnedItem]) -> set[str]:
    """The learned texts a section could show: pairs' lines, teachings, pick-ups' lines."""
    keys = ("trigger", "reply", "text", "situation", "reaction")
    return {str(item.fields[k]) for item in items for k in keys if k in item.fields}


@pytest.fixture(params=["memory", "sqlite", "redis"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Site:
    opened = open_site(request, request.param, tmp_path, "shared")
    request.addfinalizer(opened.close)
    return opened


def test_groups_chatting_at_once_each_learn_only_from_their_own_messages(
    site: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    own_ids = _chat(site, SCOPES, pause_s=0.01)
    runtime = site.runtime()
    store = runtime.stores.learned
    assert store is not None
    assert sorted(store.scopes()) == sorted((s.bot_id, s.group_id) for s in SCOPES)
    for scope in SCOPES:
        items = learned(store, scope.bot_id, scope.group_id)
        kinds = {item.kind for item in items}
        assert {"expression_pair", "teaching", "pickup"} <= kinds, (scope.tag, kinds)
        for item in items:
            assert (item.bot_id, item.group_id) == (scope.bot_id, scope.group_id)
            assert set(item.source_message_ids) <= own_ids[scope.tag], (scope.tag, item)
        # The same as the scope's chat alone learns: nothing added, nothing lost, no count moved.
        assert shape(items) == shape(_alone(scope, tmp_path, request)), scope.tag


def test_a_prompt_in_one_scope_carries_no_learned_item_of_another(site: Site) -> None:
    _chat(site, SCOPES, pause_s=0.0)
    runtime = site.runtime()
    store = runtime.stores.learned
    items = {s.tag: learned(store, s.bot_id, s.group_id) for s in SCOPES}
    ids = {tag: _hit_texts(found) for tag, found in items.items()}
    for scope in SCOPES:
        for other in SCOPES:
            # Member 301 asks with the other scope's first line and its teacher's name: every
            # learned item of the other scope would match it.
            asked = f"{other.lines[0].text} {other.lines[2].text}"
            rendered = runtime.render(turn(runtime, scope, "301", asked, LATER))
            hits = {
                hit["id"]: hit["text"]
                for traces in rendered.trace["retrieval"]["sections"].values()
                for trace in traces
                for hit in trace["hits"]
                if hit.get("id", "").startswith("learned:")
            }
            # A learned id is its kind and key (a teaching's key is its subject, the same in
            # every scope): the id and the text shown are both this scope's.
            assert set(hits) <= set(ids[scope.tag]), (scope.tag, other.tag, hits)
            for hit_id, text in hits.items():
                assert text == ids[scope.tag][hit_id], (scope.tag, other.tag, hit_id, text)
            # Member 301's own teaching of this scope goes with every message of theirs.
            teaching = next(i for i in items[scope.tag] if i.kind == "teaching")
            assert hits.get(learned_id(teaching)) == teaching.fields["text"]
            if other is scope:
                pair = next(
                    i
                    for i in items[scope.tag]
                    if i.kind == "expression_pair" and i.fields["trigger"] == scope.lines[0].text
                )
                assert learned_id(pair) in hits, (scope.tag, hits)
                continue
            shown = [t for t in _texts(items[other.tag]) if t in rendered.system_prompt]
            assert shown == [], (scope.tag, other.tag)
