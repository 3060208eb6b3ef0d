"""Why the model gave no answer, and the fix: each cause a client's result can name
(``promptweave.providers.failures``, ``docs/bot.md``)."""

from __future__ import annotations

import pytest

from promptweave import SubmitResult
from promptweave.providers.failures import (
    MODEL_FAILURE_CAUSES,
    ModelFailure,
    deadline_failure,
    model_failure,
)


@pytest.mark.parametrize(
    ("result", "cause", "fix_part"),
    [
        (
            SubmitResult(sent=False, status="offline", detail="no submit_request implementation"),
            "no_client",
            '[plugins] contrib = ["openai_compat"]',
        ),
        (
            SubmitResult(
                sent=False,
                status="error",
                detail="no API key: set provider.api_key, $PROMPTWEAVE_API_KEY or $OPENAI_API_KEY",
            ),
            "no_key",
            "set provider.api_key, $PROMPTWEAVE_API_KEY or $OPENAI_API_KEY",
        ),
        (
            SubmitResult(
                sent=False, status="error", detail="ConnectError: All connection attempts failed"
            ),
            "unreachable",
            "start the model server",
        ),
        (
            SubmitResult(
                sent=False, status="error", detail="timeout after 3 attempts (ConnectTimeout)"
            ),
            "unreachable",
            "[provider] base_url",
        ),
        (
            SubmitResult(
                sent=True, status="error", detail="timeout after 3 attempts (ReadTimeout)"
            ),
            "timeout",
            "[provider] timeout_s",
        ),
        (
            SubmitResult(sent=True, status="error", detail='HTTP 401: {"error": "invalid key"}'),
            "refused",
            "refused the key",
        ),
        (
            SubmitResult(sent=True, status="error", detail="HTTP 404: no such model"),
            "refused",
            "[provider] model",
        ),
        (
            SubmitResult(
                sent=True, status="error", detail="HTTP 429: slow down (after 3 attempts)"
            ),
            "rate_limited",
            "rate limit",
        ),
        (
            SubmitResult(sent=True, status="error", detail="HTTP 503: overloaded"),
            "server_error",
            "its own log",
        ),
        (
            SubmitResult(sent=True, status="error", detail="reply is not JSON: Expecting value"),
            "malformed",
            "ends in /v1",
        ),
        (SubmitResult(sent=True, status="ok", text=None), "malformed", "[provider] api"),
        (
            SubmitResult(sent=False, status="error", detail="RuntimeError: the client broke"),
            "plugin_fault",
            "promptweave plugins",
        ),
    ],
)
def test_each_failure_names_its_cause_the_reason_and_a_fix(
    result: SubmitResult, cause: str, fix_part: str
) -> None:
    failure = model_failure(result)
    assert failure is not None
    assert failure.cause == cause
    assert failure.cause in MODEL_FAILURE_CAUSES
    assert fix_part in failure.fix
    assert failure.reason
    assert ModelFailure.from_json(failure.to_json()) == failure


def test_an_answer_is_no_failure() -> None:
    assert model_failure(SubmitResult(sent=True, status="ok", text="好的")) is None
    assert model_failure(SubmitResult(sent=True, status="ok", text="")) is None


def test_a_deadline_is_the_models_only_while_waiting_for_it() -> None:
    waited = deadline_failure("submit", 30)
    assert waited is not None and waited.cause == "timeout"
    assert "30 s" in waited.reason and "[loop] turn_deadline_s" in waited.fix
    assert deadline_failure("render", 30) is None


def test_a_trace_entry_of_the_wrong_shape_is_no_failure() -> None:
    assert ModelFailure.from_json(None) is None
    assert ModelFailure.from_json({"cause": "no_key"}) is None
    assert ModelFailure.from_json({"cause": 1, "reason": "x", "fix": "y"}) is None
