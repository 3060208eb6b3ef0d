"""Contrib plugin ``openai_compat``: send requests to an OpenAI-compatible server.

Enable it with ``plugins.contrib = ["openai_compat"]`` in ``promptweave.toml``. It implements
``submit_request`` for the ``openai_chat`` and ``openai_responses`` formats and posts the request's
exact body bytes (what the prefix report measured is what is sent). Anthropic requests are left to
other plugins.

The base URL comes from ``provider.base_url``, else ``$PROMPTWEAVE_BASE_URL``, else
``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``; the key from ``provider.api_key``, else
``$PROMPTWEAVE_API_KEY``, else ``$OPENAI_API_KEY``. A server on another base URL (a local model
server) may need no key; the OpenAI API does.

Requires ``httpx`` (``pip install 'promptweave[openai]'``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from framework import Config, ProviderApi, ProviderRequest, SubmitResult, hookimpl

__all__ = ["DEFAULT_BASE_URL", "OpenAICompatClient", "submit_request"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ERROR_BODY_CHARS = 500
HANDLED = (ProviderApi.OPENAI_CHAT, ProviderApi.OPENAI_RESPONSES)


def _reply_text(api: ProviderApi, data: Mapping[str, Any]) -> str | None:
    if api is ProviderApi.OPENAI_CHAT:
        choices = data.get("choices") or []
        if not choices:
            return None
        content = (choices[0].get("message") or {}).get("content")
        return content if isinstance(content, str) else None
    texts = [
        part.get("text", "")
        for item in data.get("output") or []
        if item.get("type") == "message"
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    ]
    return "".join(texts) if texts else None


@attrs.define(kw_only=True, eq=False)
class OpenAICompatClient:
    """A client for one OpenAI-compatible endpoint; also a plugin (register an instance).

    It keeps one ``httpx.Client`` (its connection pool) for all its requests.

    :param base_url: the API's base URL, for example ``https://api.openai.com/v1``.
    :param api_key: the bearer key; ``""`` sends no ``Authorization`` header.
    :param timeout_s: the request timeout.
    :param transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``).
    """

    base_url: str
    api_key: str = attrs.field(default="", repr=False)
    timeout_s: float = 60.0
    transport: httpx.BaseTransport | None = None
    _http: httpx.Client | None = attrs.field(default=None, init=False, repr=False)

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(timeout=self.timeout_s, transport=self.transport)
        return self._http

    def close(self) -> None:
        """Close the connection pool."""
        if self._http is not None:
            self._http.close()
            self._http = None

    @classmethod
    def from_config(
        cls, config: Config, environ: Mapping[str, str] | None = None
    ) -> OpenAICompatClient:
        """The client ``[provider]`` and the environment describe."""
        env = os.environ if environ is None else environ
        provider = config.provider
        base_url = (
            provider.base_url
            or env.get("PROMPTWEAVE_BASE_URL")
            or env.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        )
        api_key = provider.api_key or env.get("PROMPTWEAVE_API_KEY") or env.get("OPENAI_API_KEY")
        return cls(
            base_url=base_url.rstrip("/"), api_key=api_key or "", timeout_s=provider.timeout_s
        )

    def submit(self, request: ProviderRequest) -> SubmitResult:
        """Post ``request`` and parse the reply; failures become an ``error`` result."""
        if request.api not in HANDLED:
            return SubmitResult(
                sent=False, status="error", detail=f"{request.api.value} is not OpenAI-compatible"
            )
        if not self.api_key and self.base_url == DEFAULT_BASE_URL:
            return SubmitResult(
                sent=False,
                status="error",
                detail="no API key: set provider.api_key, $PROMPTWEAVE_API_KEY or $OPENAI_API_KEY",
            )
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            response = self._client().post(
                self.base_url + request.path, content=request.body_bytes(), headers=headers
            )
        except httpx.HTTPError as exc:
            return SubmitResult(sent=False, status="error", detail=f"{type(exc).__name__}: {exc}")
        if response.status_code >= 400:
            return SubmitResult(
                sent=True,
                status="error",
                detail=f"HTTP {response.status_code}: {response.text[:ERROR_BODY_CHARS]}",
            )
        try:
            data = response.json()
        except ValueError as exc:
            return SubmitResult(sent=True, status="error", detail=f"reply is not JSON: {exc}")
        if not isinstance(data, dict):
            return SubmitResult(sent=True, status="error", detail="reply is not a JSON object")
        return SubmitResult(sent=True, status="ok", text=_reply_text(request.api, data), raw=data)

    @hookimpl
    def submit_request(self, request: ProviderRequest, config: Config) -> SubmitResult | None:
        if request.api not in HANDLED:
            return None
        return self.submit(request)


@hookimpl
def submit_request(request: ProviderRequest, config: Config) -> SubmitResult | None:
    """Send OpenAI-format requests to the configured endpoint; leave others to other plugins."""
    if request.api not in HANDLED:
        return None
    described = OpenAICompatClient.from_config(config)
    client = _shared_client(described.base_url, described.api_key, described.timeout_s)
    return client.submit(request)


@functools.lru_cache(maxsize=8)
def _shared_client(base_url: str, api_key: str, timeout_s: float) -> OpenAICompatClient:
    # One client (one connection pool) per endpoint, so requests reuse connections and TLS.
    return OpenAICompatClient(base_url=base_url, api_key=api_key, timeout_s=timeout_s)
