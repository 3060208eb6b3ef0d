"""Tools on a ``tool`` turn: which the speaker may use, offering them, running the model's calls
(``docs/bot.md``, "Tools").

Each call runs within ``[loop] tool_timeout_s``; a call the speaker is not permitted, an unknown
tool, a call that raises or times out, and a result that is not text are all answered to the model
as such (it can then say so), and traced. Nothing a tool does can stop the turn.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from promptweave.loop.events import IncomingEvent
from promptweave.plugins.contributions import Tool, ToolCallContext
from promptweave.providers.exchange import ToolCall, ToolSpec
from promptweave.runtime import Promptweave

__all__ = ["TOOL_RESULT_CHARS", "ToolRunner", "tool_arguments"]

log = logging.getLogger("promptweave.loop")

#: The longest tool result handed back to the model (and kept for the next turn's section).
TOOL_RESULT_CHARS = 2000

#: Results of the last tool round shown in the conversation's next ``tool_context`` section.
BACKGROUND_LINES = 4


def tool_arguments(raw: str) -> Mapping[str, Any] | None:
    """The decoded arguments of a tool call: a JSON object, else ``None``."""
    try:
        decoded = json.loads(raw or "{}")
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


@attrs.frozen(kw_only=True)
class ToolRunner:
    """The registered tools as one speaker in one conversation sees them."""

    tools: Mapping[str, Tool]
    context: ToolCallContext
    timeout_s: float

    @classmethod
    def for_event(cls, runtime: Promptweave, event: IncomingEvent) -> ToolRunner:
        return cls(
            tools={name: entry.item for name, entry in runtime.registries.tools.items()},
            context=ToolCallContext(
                bot_id=event.bot_id,
                group_id=event.group_id,
                user_id=event.message.sender_id,
                sender_role=event.sender_role,
                text=event.message.text,
                rng=runtime.rng,
                stores=runtime.stores,
            ),
            timeout_s=runtime.config.loop.tool_timeout_s,
        )

    def _permitted(self, tool: Tool) -> bool:
        try:
            return bool(tool.permitted(self.context))
        except Exception as exc:
            log.warning("tool %s: permission check failed, refusing: %s", tool.name, exc)
            return False

    def permitted_names(self) -> tuple[str, ...]:
        """The tools this speaker may use here."""
        return tuple(name for name, tool in self.tools.items() if self._permitted(tool))

    def required_by(self, text: str) -> str | None:
        """The first permitted tool one of whose ``intent_words`` the text contains."""
        for name in self.permitted_names():
            if any(word and word in text for word in self.tools[name].intent_words):
                return name
        return None

    def specs(self) -> tuple[ToolSpec, ...]:
        """The permitted tools, as offered to the model."""
        return tuple(
            ToolSpec(
                name=name,
                description=self.tools[name].description,
                parameters=self.tools[name].parameters,
            )
            for name in self.permitted_names()
        )

    async def run(
        self, calls: Sequence[ToolCall], trace: dict[str, Any]
    ) -> list[tuple[ToolCall, str]]:
        """Run one round of the model's calls; each gets a result text."""
        results = []
        for call in calls:
            result, status = await self._run_one(call)
            trace.setdefault("tools", []).append({"name": call.name, "status": status})
            results.append((call, result[:TOOL_RESULT_CHARS]))
        return results

    async def _run_one(self, call: ToolCall) -> tuple[str, str]:
        tool = self.tools.get(call.name)
        if tool is None:
            return f"error: no tool named {call.name!r}", "unknown"
        if not self._permitted(tool):
            return "refused: the speaker is not permitted to use this tool here", "refused"
        arguments = tool_arguments(call.arguments)
        if arguments is None:
            return "error: the arguments are not a JSON object", "bad_arguments"
        try:
            async with asyncio.timeout(self.timeout_s):
                if inspect.iscoroutinefunction(tool.call):
                    result = await tool.call(arguments, self.context)
                else:
                    # A blocking tool runs on a worker thread, so its timeout holds.
                    result = await asyncio.to_thread(tool.call, arguments, self.context)
        except TimeoutError:
            return f"failed: the tool did not answer within {self.timeout_s:g} s", "timeout"
        except Exception as exc:
            log.warning("tool %s failed: %s", call.name, exc)
            return f"failed: {type(exc).__name__}: {exc}", "failed"
        if not isinstance(result, str):
            return f"failed: the tool returned {type(result).__name__}, not text", "failed"
        return result, "ok"

    @staticmethod
    def background_lines(results: Sequence[tuple[ToolCall, str]]) -> tuple[str, ...]:
        """The round's results as lines of the next turn's ``tool_context`` section."""
        lines = [f"{call.name}: {' '.join(text.split())[:200]}" for call, text in results]
        return tuple(lines[-BACKGROUND_LINES:])
