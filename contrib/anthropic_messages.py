"""Contrib plugin ``anthropic_messages``: send requests to the Anthropic Messages API.

Enable it with ``plugins.contrib = ["anthropic_messages"]`` in ``promptweave.toml``. It implements
``submit_request`` (sync) and ``submit_request_async`` (for a bot's event loop) for the
``anthropic`` format and posts the request's exact body bytes to ``{base_url}/v1/messages`` with
the ``x-api-key`` and ``anthropic-version: 2023-06-01`` headers. OpenAI-format requests are left
to other plugins (``openai_compat``).

The base URL comes from ``provider.base_url`` (when ``provider.api`` is ``anthropic``), else
``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``; the key from ``provider.api_key``
(likewise), else ``$PROMPTWEAVE_API_KEY``, else ``$ANTHROPIC_API_KEY``. The Anthropic API needs a
key; a gateway on another base URL may not.

Rate limits (429), overload (529) and other server errors, timeouts and broken connections are
retried as by ``openai_compat`` (``docs/turn_context.md``, "Clients and retries"). The result
carries the reply's text, its ``tool_use`` calls and the token usage, cache reads and writes
included.

Requires ``httpx`` and ``tenacity`` (``pip install 'promptweave[anthropic]'``).
"""

from __future__ import annotations

import os
from collections.abc import Coroutine, Mapping
from typing import Any, ClassVar

import attrs

from promptweave import Config, ProviderApi, ProviderRequest, SubmitResult, hookimpl
from promptweave.contrib._provider_http import ProviderClient, RetryPolicy, shared_client

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_BASE_URL",
    "AnthropicMessagesClient",
    "RetryPolicy",
    "submit_request",
    "submit_request_async",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The API version the bodies are written for (``anthropic-version`` header).
ANTHROPIC_VERSION = "2023-06-01"


@attrs.define(kw_only=True, eq=False)
class AnthropicMessagesClient(ProviderClient):
    """A client for the Anthropic Messages API; also a plugin (register an instance).

    It keeps one ``httpx.Client`` for its sync requests and one ``httpx.AsyncClient`` per event
    loop for its async ones.

    :param base_url: the API's base URL, without ``/v1`` (``https://api.anthropic.com``).
    :param api_key: sent as ``x-api-key``; ``""`` sends none (a gateway that adds it).
    :param timeout_s: each attempt's timeout.
    :param retry: when to try again and how long to wait (:class:`RetryPolicy`).
    :param transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``, which serves
        the async path too).
    :param async_transport: an ``httpx`` transport for the async path only.
    """

    handled: ClassVar[tuple[ProviderApi, ...]] = (ProviderApi.ANTHROPIC,)
    other_formats: ClassVar[str] = "an Anthropic Messages request"
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    key_variable: ClassVar[str] = "ANTHROPIC_API_KEY"
    base_url: str = DEFAULT_BASE_URL

    @classmethod
    def from_config(
        cls, config: Config, environ: Mapping[str, str] | None = None
    ) -> AnthropicMessagesClient:
        """The client ``[provider]`` and the environment describe."""
        env = os.environ if environ is None else environ
        provider = config.provider
        # [provider] base_url and api_key belong to the configured format's client.
        own = ProviderApi(provider.api) is ProviderApi.ANTHROPIC
        base_url = (
            (provider.base_url if own else "") or env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        )
        api_key = (
            (provider.api_key if own else "")
            or env.get("PROMPTWEAVE_API_KEY")
            or env.get("ANTHROPIC_API_KEY")
        )
        return cls(
            base_url=base_url.rstrip("/"),
            api_key=api_key or "",
            timeout_s=provider.timeout_s,
            retry=RetryPolicy.from_config(config),
        )

    def headers(self) -> dict[str, str]:
        """JSON, the API version, and the key as ``x-api-key``."""
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers


def _configured(config: Config) -> AnthropicMessagesClient:
    return shared_client(AnthropicMessagesClient.from_config(config))


@hookimpl
def submit_request(request: ProviderRequest, config: Config) -> SubmitResult | None:
    """Send Anthropic requests to the configured endpoint; leave others to other plugins."""
    if request.api is not ProviderApi.ANTHROPIC:
        return None
    return _configured(config).submit(request)


@hookimpl
def submit_request_async(
    request: ProviderRequest, config: Config
) -> Coroutine[Any, Any, SubmitResult] | None:
    """The same, on the event loop: the coroutine that sends the request."""
    if request.api is not ProviderApi.ANTHROPIC:
        return None
    return _configured(config).asubmit(request)
