"""What a replay learned (``docs/replay.md``, learning in a replay).

A replay runs the learners on the log's clock: after each message, what is due at its time runs
one learner after another on the replay's thread (:meth:`LearningStage.run_due` with
``threads=False``), so a replay into a fresh store repeats exactly. Each message record lists the
runs made at its time (``learned``) and the learned items its reply's prompt carried
(``learned_in_prompt``: the retrieved sources whose id starts with ``learned:``); the summary
gives, per group, what the store holds at the end, the learners that failed, and the first
answered turn whose prompt carried a learned item of each kind.

Nothing here holds a duration: a run's ``duration_ms`` differs from one replay to the next, so it
is left out of every record, summary and report.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from promptweave.delivery.outgoing import ReplyInjection
from promptweave.learning.budget import SPEND_KIND, Spend, spend_totals
from promptweave.learning.model import ModelCall
from promptweave.learning.stage import LearnerRun, RunStatus
from promptweave.plugins.hookspecs import hookimpl
from promptweave.runtime import Promptweave
from promptweave.turn import ChatMessage

__all__ = [
    "LEARNED_PREFIX",
    "LEARNED_SECTIONS",
    "InjectionWatch",
    "learned_hits",
    "learning_state",
    "learning_summary",
    "run_record",
]

#: The most unanswered learning-model calls (invalid, failed, over budget) the summary lists.
PROBLEMS_KEPT = 20
#: The id of a learned item's retrieval hit starts with this: ``learned:<kind>:<key>``.
LEARNED_PREFIX = "learned:"
#: The kinds of learned item a prompt carries, and the section each is expected in; the summary
#: says for each when a prompt first carried one (or that none did).
LEARNED_SECTIONS: Mapping[str, str] = {
    "expression_pair": "group_expression",
    # The learned rhythm shapes the reply and is shown with the group's expression.
    "rhythm": "group_expression",
    "teaching": "memory",
    "strategy": "behavior_reference",
    "person_fact": "person_facts",
    "relationship": "relationship",
    "group_event": "memory",
}


def run_record(run: LearnerRun) -> dict[str, Any]:
    """One learner run as a message record lists it: :meth:`LearnerRun.to_json` without its
    duration (nor its model calls')."""
    data = run.to_json()
    data.pop("duration_ms", None)
    for call in data.get("model_calls") or ():
        call.pop("duration_ms", None)
    return data


def call_record(call: ModelCall) -> dict[str, Any]:
    """One learning-model call as the summary lists it, without its duration."""
    data = call.to_json()
    data.pop("duration_ms", None)
    return data


@attrs.define(eq=False)
class InjectionWatch:
    """An observer plugin (``observe_reply_delivered``) that keeps what each delivered reply's
    prompt carried, for the replay to read after the message (:meth:`drain`)."""

    name: str = "replay_injections"
    _seen: list[ReplyInjection] = attrs.field(factory=list, init=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    @hookimpl
    def observe_reply_delivered(
        self,
        bot_id: str,
        group_id: str | None,
        text: str,
        message_id: str | None,
        answering: ChatMessage | None,
        injection: ReplyInjection,
    ) -> None:
        with self._lock:
            self._seen.append(injection)

    def drain(self) -> list[ReplyInjection]:
        """The injections observed since the last call, in order."""
        with self._lock:
            seen, self._seen = self._seen, []
        return seen


def learned_hits(injections: Sequence[ReplyInjection]) -> list[dict[str, str]]:
    """The learned items the prompts carried (``{"section", "kind", "id"}``), each once, in the
    order the prompts list them."""
    hits: dict[tuple[str, str], dict[str, str]] = {}
    for injection in injections:
        for source in injection.retrieved:
            if not source.id.startswith(LEARNED_PREFIX):
                continue
            kind = source.id[len(LEARNED_PREFIX) :].partition(":")[0]
            hits.setdefault(
                (source.section, source.id),
                {"section": source.section, "kind": kind, "id": source.id},
            )
    return list(hits.values())


def learning_state(runtime: Promptweave) -> dict[str, Any]:
    """What the learned store holds at the end of a replay: whether learning was on (and why
    not), the learners that ran, and per (bot, group) its items per kind."""
    stage = runtime.learning
    learned = runtime.stores.learned
    groups = []
    scopes = sorted(learned.scopes()) if learned is not None else []
    for bot_id, group_id in scopes:
        assert learned is not None
        every = learned.items(bot_id, group_id)
        spent = {
            learner: spend.to_json()
            for (_b, _g, learner), spend in sorted(spend_totals(every).items())
        }
        items = sorted(
            (item for item in every if item.kind != SPEND_KIND),
            key=lambda item: (item.kind, -item.count, item.key),
        )
        if not items and not spent:
            continue
        counts: dict[str, int] = {}
        for item in items:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        groups.append(
            {
                "bot_id": bot_id,
                "group_id": group_id,
                "counts": dict(sorted(counts.items())),
                "items": [item.to_json() for item in items],
                "spend": spent,
            }
        )
    model = runtime.learning_model
    calls: dict[str, int] = {}
    problems: list[dict[str, Any]] = []  # the calls that gave no valid answer
    for call in model.calls if model is not None else ():
        calls[call.status] = calls.get(call.status, 0) + 1
        if call.status != "ok" and len(problems) < PROBLEMS_KEPT:
            problems.append(call_record(call))
    return {
        "enabled": stage.enabled,
        "off": stage.unavailable,
        "learners": [learner.name for learner in stage.plans],
        "skipped": dict(sorted(stage.skipped.items())),
        "model": None if model is None else model.label,
        "model_off": runtime.learning_model_unavailable,
        "model_calls": dict(sorted(calls.items())),
        "model_problems": problems,
        "groups": groups,
    }


def learning_summary(
    records: Sequence[Mapping[str, Any]],
    state: Mapping[str, Any] | None,
    *,
    turns: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The summary's ``learning`` object: ``state`` (:func:`learning_state`), the runs of the
    records by status, the learners that failed (named, with their first error), and per group
    its items, failures, the first answered turn whose prompt carried each kind, and what
    learning spent (per learner) beside what the turns spent (``turns``, per group)."""
    state = state or {"enabled": False, "off": "not recorded", "learners": [], "groups": []}
    runs: dict[str, int] = {}
    failures: dict[tuple[str, str, str], dict[str, Any]] = {}
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        for run in record.get("learned") or ():
            runs[run["status"]] = runs.get(run["status"], 0) + 1
            if run["status"] != RunStatus.FAILED:
                continue
            key = (run["bot_id"], run["group_id"], run["learner"])
            failure = failures.setdefault(
                key,
                {
                    "learner": run["learner"],
                    "bot_id": run["bot_id"],
                    "group_id": run["group_id"],
                    "runs": 0,
                    "error": run["error"],
                    "first_index": record["index"],
                    "first_time": record["time"],
                },
            )
            failure["runs"] += 1
        if record.get("status") != "replied" or record.get("group_id") is None:
            continue
        for hit in record.get("learned_in_prompt") or ():
            first.setdefault(
                (record["group_id"], hit["kind"]),
                {
                    "kind": hit["kind"],
                    "section": hit["section"],
                    "id": hit["id"],
                    "index": record["index"],
                    "time": record["time"],
                    "message_id": record["message_id"],
                },
            )
    stored = {group["group_id"]: group for group in state["groups"]}
    group_ids = sorted(
        {*stored, *(r["group_id"] for r in records if r.get("group_id") is not None)}
    )
    groups = []
    total = Spend()
    for group_id in group_ids:
        group = stored.get(group_id, {"group_id": group_id, "counts": {}, "items": [], "spend": {}})
        spent = Spend()
        for learner_spend in group.get("spend", {}).values():
            spent.add(Spend.from_fields(learner_spend))
        total.add(spent)
        kinds = [
            *LEARNED_SECTIONS,
            *sorted({k for g, k in first if g == group_id} - {*LEARNED_SECTIONS}),
        ]
        groups.append(
            {
                **group,
                "learning_spend": spent.to_json(),
                "turns_spend": dict((turns or {}).get(group_id, {})),
                "failures": [f for (_b, g, _l), f in sorted(failures.items()) if g == group_id],
                "first_in_prompt": [
                    first.get(
                        (group_id, kind),
                        {"kind": kind, "section": LEARNED_SECTIONS.get(kind), "index": None},
                    )
                    for kind in kinds
                ],
            }
        )
    return {
        "enabled": state["enabled"],
        "off": state["off"],
        "learners": list(state["learners"]),
        "runs": dict(sorted(runs.items())),
        "failures": [failures[key] for key in sorted(failures)],
        "skipped": dict(state.get("skipped", {})),
        "model": state.get("model"),
        "model_off": state.get("model_off"),
        "model_calls": dict(state.get("model_calls", {})),
        "model_problems": list(state.get("model_problems", [])),
        "spend": total.to_json(),
        "groups": groups,
    }
