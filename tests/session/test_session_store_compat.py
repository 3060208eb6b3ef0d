"""A session store written before ``user_turns`` took ``usage`` still serves the history read."""

from __future__ import annotations

import datetime as dt

import attrs
from base_support import BOT, GROUP

from promptweave import ChatMessage, Config, Promptweave, SessionTurn, Stores, Turn
from promptweave.store.sessions_memory import MemorySessionStore

USER = "30022"
T0 = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)


class OlderSessionStore(MemorySessionStore):
    """``user_turns`` as a backend wrote it before the parameter came."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def user_turns(  # type: ignore[override]
        self,
        bot_id: str,
        group_id: str,
        user_id: str,
        *,
        until: dt.datetime,
        limit: int,
        since: dt.datetime | None = None,
    ) -> list[SessionTurn]:
        self.reads += 1
        return super().user_turns(bot_id, group_id, user_id, until=until, limit=limit, since=since)


def test_the_history_is_read_from_a_store_whose_user_turns_takes_no_usage():
    older = OlderSessionStore()
    stores = attrs.evolve(Stores.in_memory(), sessions=older)
    older.append_turns(
        [
            SessionTurn(
                bot_id=BOT.id, group_id=GROUP, user_id=USER, role=role, content=text, time=T0
            )
            for role, text in (("user", "周六的桌游局几点开始？"), ("assistant", "七点，老地方"))
        ],
        storage_window=50,
    )
    runtime = Promptweave.from_config(Config(), stores=stores)
    message = ChatMessage(
        id="m2",
        sender_id=USER,
        sender_name="阿蒙",
        text="那我六点半到",
        raw="@小织 那我六点半到",
        addressed=True,
        time=T0 + dt.timedelta(minutes=5),
    )
    rendered = runtime.render(Turn(bot=BOT, group_id=GROUP, message=message))
    runtime.close()
    assert older.reads >= 1
    history = [(m.role, m.content) for m in rendered.messages[:2]]
    assert [role for role, _ in history] == ["user", "assistant"]
    assert history[0][1].endswith("周六的桌游局几点开始？")
    assert history[1][1] == "七点，老地方"
