"""Built-in plugin ``request_defaults``: the defaults of the turn-context and request hooks.

All are ``trylast``, so any other plugin's implementation wins:

- ``submit_request`` sends nothing and returns an offline result, so assembling, rendering and
  inspecting turns never needs a network (enable the ``openai_compat`` or ``anthropic_messages``
  contrib plugin to send);
- ``fetch_image`` reads ``http(s)`` and ``data:`` images within the configured limits;
- ``compress_turn_messages`` runs the built-in preflight compression.
"""

from __future__ import annotations

from collections.abc import Sequence

from promptweave import (
    Config,
    FetchedImage,
    ImageLimits,
    PromptMessage,
    ProviderRequest,
    SubmitResult,
    hookimpl,
)
from promptweave.messages.images import fetch_image_default
from promptweave.turn_context.preflight import default_compress_messages

OFFLINE_DETAIL = (
    "offline: no provider client is enabled; the request was built but not sent "
    "(enable the openai_compat or anthropic_messages contrib plugin, or implement "
    "submit_request)"
)


@hookimpl(trylast=True)
def submit_request(request: ProviderRequest, config: Config) -> SubmitResult:
    return SubmitResult(sent=False, status="offline", detail=OFFLINE_DETAIL)


@hookimpl(trylast=True)
def fetch_image(url: str, limits: ImageLimits) -> FetchedImage:
    return fetch_image_default(url, limits)


@hookimpl(trylast=True)
def compress_turn_messages(
    messages: Sequence[PromptMessage], pass_number: int, protect_first: int, protect_last: int
) -> list[PromptMessage]:
    return default_compress_messages(
        messages, pass_number, protect_first=protect_first, protect_last=protect_last
    )
