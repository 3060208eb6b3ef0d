"""A plugin fault in a replay: named in the message's record, counted in the summary and shown
under the row of the report, its detail cut."""

from __future__ import annotations

import asyncio
from typing import Any

from loop_support import T0, event, make_loop

from promptweave import Section, hookimpl
from promptweave.replay.replayer import ReplayClock, replay_events, summarize
from promptweave.replay.report import render_report


class Broken:
    @hookimpl
    def register_sections(self, register: Any) -> None:
        def render(context: Any) -> str:
            raise RuntimeError("boom " + "x" * 10_000)

        register(Section(id="broken", title="坏", render=render))


def test_a_plugin_fault_is_in_the_record_the_summary_and_the_report() -> None:
    loop, _model = make_loop("好的")
    loop.runtime.add_plugin(Broken(), name="broken")
    clock = ReplayClock(now=T0)
    events = [event("小织 周末有什么活动吗？", addressed=True), event("今天食堂又是土豆烧鸡")]
    try:
        records = asyncio.run(replay_events(loop, clock, events))
    finally:
        loop.runtime.close()
    [fault] = records[0]["plugin_faults"]
    assert (fault["plugin"], fault["where"], fault["kind"]) == (
        "broken",
        "section 'broken'",
        "raised",
    )
    assert len(fault["detail"]) < 400 and "(cut, " in fault["detail"]
    assert "plugin_faults" not in records[1]  # a clean turn's record is as it was
    summary = summarize(records, model="m", model_label="m")
    assert summary["plugin_faults"] == {"broken: section 'broken' raised": 1}
    page = render_report(records, title="t")
    assert "section &#x27;broken&#x27; of plugin &#x27;broken&#x27; raised" in page
    assert "x" * 400 not in page
