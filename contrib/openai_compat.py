"""Contrib plugin ``openai_compat``: send requests to an OpenAI-compatible server.

Enable it with ``plugins.contrib = ["openai_compat"]`` in ``promptweave.toml``. It implements
``submit_request`` (sync, for the CLI and scripts) and ``submit_request_async`` (for a bot's event
loop) for the ``openai_chat`` and ``openai_responses`` formats, and posts the request's exact body
bytes (what the prefix report measured is what is sent). Anthropic requests are left to other
plugins (``anthropic_messages``).

The base URL comes from ``provider.base_url`` (when ``provider.api`` is an OpenAI format), else
``$PROMPTWEAVE_BASE_URL``, else ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``; the key
from ``provider.api_key`` (likewise), else ``$PROMPTWEAVE_API_KEY``, else ``$OPENAI_API_KEY``. A
server on another base URL (a local model server) may need no key; the OpenAI API does.

Rate limits, server errors, timeouts and broken connections are retried (``[provider]
max_attempts``, ``retry_max_wait_s``; ``docs/turn_context.md``, "Clients and retries"). The
result carries the reply's text, its tool calls and the token usage the server reported.

Requires ``httpx`` and ``tenacity`` (``pip install 'promptweave[openai]'``).
"""

from __future__ import annotations

import os
from collections.abc import Coroutine, Mapping
from typing import Any, ClassVar

import attrs

from promptweave import Config, ProviderApi, ProviderRequest, SubmitResult, hookimpl
from promptweave.contrib._provider_http import ProviderClient, RetryPolicy, shared_client

__all__ = [
    "DEFAULT_BASE_URL",
    "OpenAICompatClient",
    "RetryPolicy",
    "submit_request",
    "submit_request_async",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
HANDLED = (ProviderApi.OPENAI_CHAT, ProviderApi.OPENAI_RESPONSES)


@attrs.define(kw_only=True, eq=False)
class OpenAICompatClient(ProviderClient):
    """A client for one OpenAI-compatible endpoint; also a plugin (register an instance).

    It keeps one ``httpx.Client`` for its sync requests and one ``httpx.AsyncClient`` per event
    loop for its async ones (their connection pools).

    :param base_url: the API's base URL, for example ``https://api.openai.com/v1``.
    :param api_key: the bearer key; ``""`` sends no ``Authorization`` header.
    :param timeout_s: each attempt's timeout.
    :param retry: when to try again and how long to wait (:class:`RetryPolicy`).
    :param transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``, which serves
        the async path too).
    :param async_transport: an ``httpx`` transport for the async path only.
    """

    handled: ClassVar[tuple[ProviderApi, ...]] = HANDLED
    other_formats: ClassVar[str] = "OpenAI-compatible"
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    key_variable: ClassVar[str] = "OPENAI_API_KEY"

    @classmethod
    def from_config(
        cls, config: Config, environ: Mapping[str, str] | None = None
    ) -> OpenAICompatClient:
        """The client ``[provider]`` and the environment describe."""
        env = os.environ if environ is None else environ
        provider = config.provider
        # [provider] base_url and api_key belong to the configured format's client.
        own = ProviderApi(provider.api) in HANDLED
        base_url = (
            (provider.base_url if own else "")
            or env.get("PROMPTWEAVE_BASE_URL")
            or env.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        )
        api_key = (
            (provider.api_key if own else "")
            or env.get("PROMPTWEAVE_API_KEY")
            or env.get("OPENAI_API_KEY")
        )
        return cls(
            base_url=base_url.rstrip("/"),
            api_key=api_key or "",
            timeout_s=provider.timeout_s,
            retry=RetryPolicy.from_config(config),
        )

    def headers(self) -> dict[str, str]:
        """JSON, and the key as a bearer token."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


#: What :meth:`OpenAICompatClient.from_config` reads from the environment.
_ENVIRONMENT = ("PROMPTWEAVE_BASE_URL", "OPENAI_BASE_URL", "PROMPTWEAVE_API_KEY", "OPENAI_API_KEY")
#: The client of the configuration last asked for, with the environment it was made in: a bot
#: asks with the same configuration on every turn (a configuration does not change; a new one,
#: or a changed environment, makes the client again).
_last: list[tuple[Config, tuple[str | None, ...], OpenAICompatClient]] = []


def _configured(config: Config) -> OpenAICompatClient:
    environment = tuple(map(os.environ.get, _ENVIRONMENT))
    if _last:
        known, made_in, client = _last[0]
        if known is config and made_in == environment:
            return client
    client = shared_client(OpenAICompatClient.from_config(config))
    _last[:] = [(config, environment, client)]
    return client


@hookimpl
def submit_request(request: ProviderRequest, config: Config) -> SubmitResult | None:
    """Send OpenAI-format requests to the configured endpoint; leave others to other plugins."""
    if request.api not in HANDLED:
        return None
    return _configured(config).submit(request)


@hookimpl
def submit_request_async(
    request: ProviderRequest, config: Config
) -> Coroutine[Any, Any, SubmitResult] | None:
    """The same, on the event loop: the coroutine that sends the request."""
    if request.api not in HANDLED:
        return None
    return _configured(config).asubmit(request)
