"""``tokenize_endpoint``: count tokens with the model server's own tokenizer (``docs/cost.md``,
"Counting tokens").

Enable it with ``[plugins] contrib = ["tokenize_endpoint"]`` and point ``[tokens] tokenize_url``
at the server's tokenize endpoint:

- llama.cpp's server: ``http://HOST:PORT/tokenize`` (``{"content": text}`` in, ``{"tokens": [...]}``
  out);
- llama-cpp-python's server: ``http://HOST:PORT/extras/tokenize/count`` (``{"input": text}`` in,
  ``{"count": n}`` out) or ``.../extras/tokenize`` (``{"tokens": [...]}`` out).

The request's key is chosen by the path (``/extras/…`` takes ``input``, anything else
``content``). Each count is kept in a bounded cache (``[tokens] cache_size``), so the system
prompt and the history, which every turn sends again, are asked once. A call that fails (the
server down, a timeout, an answer without a count) raises, so the turn's ``plugin_faults`` names
the plugin and why and the estimate counts that text; then the endpoint is not asked again for
``[tokens] retry_after_s``, and every text meanwhile raises at once with the first error, so
each turn's trace still says its figures are estimated and why. With ``tokenize_url = ""`` the
plugin counts nothing (the estimate counts, as without it).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx

from promptweave import Config, hookimpl

__all__ = ["TokenizeEndpoint", "TokenizeEndpointError", "count_tokens", "endpoint_for"]


class TokenizeEndpointError(RuntimeError):
    """The tokenize endpoint gave no count (its URL and why are in the message)."""


def _input_key(url: str) -> str:
    return "input" if "/extras/" in urlsplit(url).path else "content"


@attrs.define(eq=False)
class TokenizeEndpoint:
    """One tokenize endpoint, its cache of counts and its back-off after a failure.

    :param clock: the monotonic clock the back-off reads (injectable for tests).
    """

    url: str
    timeout_s: float
    cache_size: int
    retry_after_s: float
    clock: Callable[[], float] = time.monotonic
    _client: httpx.Client = attrs.field(init=False)
    _cache: OrderedDict[bytes, int] = attrs.field(init=False, factory=OrderedDict)
    _lock: threading.Lock = attrs.field(init=False, factory=threading.Lock)
    _failed: tuple[float, str] | None = attrs.field(init=False, default=None)
    calls: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        self._client = httpx.Client(timeout=self.timeout_s)

    def count(self, text: str) -> int:
        """The tokens of ``text`` as the server counts them.

        :raises TokenizeEndpointError: the server gave no count, now or within
            ``retry_after_s`` of a failure.
        """
        key = hashlib.blake2b(text.encode(), digest_size=16).digest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            if self._failed is not None:
                since, error = self._failed
                waited = self.clock() - since
                if waited < self.retry_after_s:
                    raise TokenizeEndpointError(
                        f"{self.url} is not asked for {self.retry_after_s:g} s after a "
                        f"failure: {error}"
                    )
                self._failed = None
        try:
            counted = self._ask(text)
        except TokenizeEndpointError as exc:
            with self._lock:
                self._failed = (self.clock(), str(exc))
            raise
        with self._lock:
            if self.cache_size:
                self._cache[key] = counted
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return counted

    def _ask(self, text: str) -> int:
        self.calls += 1
        try:
            response = self._client.post(self.url, json={_input_key(self.url): text})
            response.raise_for_status()
            answer: Any = response.json()
        except httpx.HTTPStatusError as exc:
            raise TokenizeEndpointError(
                f"{self.url} answered HTTP {exc.response.status_code}"
            ) from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise TokenizeEndpointError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if isinstance(answer, dict):
            count = answer.get("count")
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                return count
            tokens = answer.get("tokens")
            if isinstance(tokens, list):
                return len(tokens)
        raise TokenizeEndpointError(
            f"{self.url} answered {str(answer)[:80]!r}, with neither a count nor tokens"
        )

    def close(self) -> None:
        self._client.close()


_endpoints: dict[tuple[str, float, int, float], TokenizeEndpoint] = {}
_endpoints_lock = threading.Lock()


def endpoint_for(config: Config) -> TokenizeEndpoint | None:
    """The endpoint of ``[tokens]`` (one per setting, shared by the turns), or ``None`` when
    ``tokenize_url`` is empty."""
    settings = config.tokens
    if not settings.tokenize_url:
        return None
    key = (
        settings.tokenize_url,
        settings.timeout_s,
        settings.cache_size,
        settings.retry_after_s,
    )
    with _endpoints_lock:
        endpoint = _endpoints.get(key)
        if endpoint is None:
            endpoint = _endpoints[key] = TokenizeEndpoint(
                url=settings.tokenize_url,
                timeout_s=settings.timeout_s,
                cache_size=settings.cache_size,
                retry_after_s=settings.retry_after_s,
            )
    return endpoint


@hookimpl
def count_tokens(text: str, config: Config) -> int | None:
    endpoint = endpoint_for(config)
    if endpoint is None:
        return None
    return endpoint.count(text)
