"""Why a turn that called the model got no answer from it, and what fixes that (``docs/bot.md``,
"When the bot does not answer").

A :class:`ModelFailure` names the cause in one word (``no_client``, ``no_key``, ``unreachable``,
``refused``, ``rate_limited``, ``server_error``, ``timeout``, ``malformed``, ``plugin_fault``), the
reason as the client said it, and the fix an operator can apply. The live loop puts it into the
turn's trace (``trace["model_failure"]``); the NoneBot plugin logs it, once per cause within a
while, and ``promptweave replay`` counts it in its summary and shows it in its report.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from promptweave.providers.exchange import SubmitResult

__all__ = ["MODEL_FAILURE_CAUSES", "ModelFailure", "deadline_failure", "model_failure"]

#: Every cause, in the order an operator checks them.
MODEL_FAILURE_CAUSES = (
    "no_client",
    "no_key",
    "unreachable",
    "refused",
    "rate_limited",
    "server_error",
    "timeout",
    "malformed",
    "plugin_fault",
)

_HTTP_STATUS = re.compile(r"^HTTP (\d{3})")
_CLIENT_MISSING = (
    'enable a model client in promptweave.toml: [plugins] contrib = ["openai_compat"] '
    '(or "anthropic_messages"), with [provider] api, model and base_url'
)
_UNREACHABLE = (
    "start the model server, or correct [provider] base_url (NoneBot: PROMPTWEAVE_BASE_URL "
    "in .env); the start-up line names the endpoint in use"
)
_FIX_BY_STATUS = {
    400: "the endpoint rejected the request: check [provider] model and api against what the "
    "endpoint serves",
    401: "the endpoint refused the key: set a valid [provider] api_key, $PROMPTWEAVE_API_KEY "
    "(NoneBot: PROMPTWEAVE_API_KEY in .env)",
    403: "the key may not use this model or endpoint: check the key's permissions and "
    "[provider] model",
    404: "the endpoint has no such path or model: check [provider] base_url (it ends in /v1 "
    "for OpenAI-compatible servers) and [provider] model",
}


@attrs.frozen(kw_only=True)
class ModelFailure:
    """Why the model gave no answer.

    :param cause: one of :data:`MODEL_FAILURE_CAUSES`.
    :param reason: what went wrong, as the client or the loop said it.
    :param fix: what the operator can do about it.
    """

    cause: str
    reason: str
    fix: str

    def to_json(self) -> dict[str, str]:
        return {"cause": self.cause, "reason": self.reason, "fix": self.fix}

    @classmethod
    def from_json(cls, data: Any) -> ModelFailure | None:
        """The failure a trace or a replay record holds, or ``None`` when it holds none."""
        if not isinstance(data, dict):
            return None
        fields = [data.get(name) for name in ("cause", "reason", "fix")]
        if not all(isinstance(value, str) for value in fields):
            return None
        cause, reason, fix = fields
        return cls(cause=str(cause), reason=str(reason), fix=str(fix))

    def describe(self) -> str:
        """``no API key: set provider.api_key, … (fix: …)``: one line for a log."""
        return f"{self.reason} (fix: {self.fix})"


def model_failure(result: SubmitResult) -> ModelFailure | None:
    """Why ``result`` brought no answer; ``None`` when it brought one (text or tool calls)."""
    detail = result.detail.strip()
    if result.status == "ok":
        if result.text is not None or result.tool_calls:
            return None
        return ModelFailure(
            cause="malformed",
            reason="the model's reply held no text and no tool call",
            fix="check that [provider] api matches the endpoint's format (openai_chat, "
            "openai_responses or anthropic) and that [provider] model is a chat model",
        )
    if result.status == "offline":
        return ModelFailure(
            cause="no_client",
            reason=f"no plugin sends requests to a model ({detail or 'offline'})",
            fix=_CLIENT_MISSING,
        )
    if detail.startswith("no API key"):
        return ModelFailure(
            cause="no_key",
            reason="no API key for the endpoint",
            fix=detail.removeprefix("no API key:").strip()
            + " (NoneBot: PROMPTWEAVE_API_KEY in .env); a local server on another "
            "[provider] base_url needs none",
        )
    status = _HTTP_STATUS.match(detail)
    if status is not None:
        code = int(status.group(1))
        if code == 429:
            return ModelFailure(
                cause="rate_limited",
                reason=detail,
                fix="the endpoint's rate limit or quota is spent: wait, raise the quota, or "
                "lower the reply frequency; [provider] max_attempts retries it",
            )
        if code >= 500:
            return ModelFailure(
                cause="server_error",
                reason=detail,
                fix="the model server failed: see its own log; [provider] max_attempts retries it",
            )
        return ModelFailure(
            cause="refused",
            reason=detail,
            fix=_FIX_BY_STATUS.get(code, "check [provider] model, api_key and base_url"),
        )
    if "ConnectTimeout" in detail or "ConnectError" in detail or "PoolTimeout" in detail:
        return ModelFailure(cause="unreachable", reason=detail, fix=_UNREACHABLE)
    if detail.startswith("timeout"):
        return ModelFailure(
            cause="timeout",
            reason=detail,
            fix="the endpoint answered too slowly: raise [provider] timeout_s, or use a "
            "faster model or server",
        )
    if detail.startswith("reply is not"):
        return ModelFailure(
            cause="malformed",
            reason=detail,
            fix="the endpoint did not answer in the API's format: check [provider] base_url "
            "(an OpenAI-compatible server's ends in /v1) and [provider] api",
        )
    if "Network" in detail or "Protocol" in detail or "Read" in detail:
        return ModelFailure(cause="unreachable", reason=detail, fix=_UNREACHABLE)
    return ModelFailure(
        cause="plugin_fault",
        reason=detail or "the model client failed without a word",
        fix="the model client plugin failed: see the error logged with it, and "
        "`promptweave plugins` for its version",
    )


def deadline_failure(stage: str, deadline_s: float) -> ModelFailure | None:
    """Why a turn that reached its deadline in ``stage`` got no answer, when the model was the
    stage it waited for (``submit`` or ``tools``); ``None`` for any other stage."""
    if stage not in ("submit", "tools"):
        return None
    return ModelFailure(
        cause="timeout",
        reason=f"the turn reached its deadline ({deadline_s:g} s) waiting in stage {stage}",
        fix="raise [loop] turn_deadline_s (and [provider] timeout_s), or use a faster model "
        "or server",
    )
