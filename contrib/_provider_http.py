"""What the contrib provider clients share: one POST with retries, sync or async, read into a
:class:`promptweave.SubmitResult`.

Not a plugin (its name starts with ``_``). A request is retried on a rate limit (429), a server
error (5xx), a timeout, a broken connection, or a successful reply that is no answer (malformed
JSON, not an object, no ``choices``/``output``/``content``), at most ``max_attempts`` times in
all; another 4xx is final. Between attempts it waits what the server asked (``Retry-After``, in seconds or as
an HTTP date, or ``retry-after-ms``), else an exponential backoff with jitter; never longer than
``max_wait_s``. tenacity runs the attempts, with ``time.sleep`` or ``asyncio.sleep`` (both
injectable, so tests never sleep).

Requires ``httpx`` and ``tenacity`` (``pip install 'promptweave[openai]'`` or
``'promptweave[anthropic]'``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import functools
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, ClassVar, TypeVar, cast

import attrs
import httpx
import tenacity

from promptweave import Config, ProviderApi, ProviderRequest, SubmitResult, hookimpl, parse_answer

__all__ = [
    "ERROR_BODY_CHARS",
    "ProviderClient",
    "ProviderHttp",
    "RetryPolicy",
    "retry_after_s",
    "shared_client",
]

#: How much of an error response's body its ``detail`` keeps.
ERROR_BODY_CHARS = 500
#: Statuses worth another attempt: rate limited, or the server failed. Any other 4xx is final:
#: the same request would fail the same way.
RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))
#: Transport failures worth another attempt. Connection failures mean nothing reached the server.
RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
NOT_SENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def retry_after_s(headers: Mapping[str, str], now: float) -> float | None:
    """The wait a response asks for, in seconds: ``retry-after-ms`` (OpenAI), else
    ``Retry-After`` as seconds or as an HTTP date (relative to ``now``, a Unix time); ``None``
    when it asks for none or the value cannot be read."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, when.timestamp() - now)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """When and how long to wait before trying a request again.

    :param max_attempts: attempts in all, the first included (``[provider] max_attempts``).
    :param max_wait_s: the longest wait between two attempts, ``Retry-After`` included
        (``[provider] retry_max_wait_s``).
    :param initial_wait_s: the backoff before the second attempt; it doubles each time.
    :param wait: the backoff, given the number of the attempt that failed (1 for the first);
        ``None`` for the default: half of ``initial_wait_s * 2 ** (n - 1)`` plus a random part
        up to the other half (the jitter keeps many clients from retrying in step).
    :param rng: the jitter's random source.
    :param sleep: how the synchronous client waits.
    :param async_sleep: how the asynchronous client waits.
    :param clock: the current Unix time, for a ``Retry-After`` given as a date.
    """

    max_attempts: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    max_wait_s: float = attrs.field(default=20.0, validator=attrs.validators.ge(0.0))
    initial_wait_s: float = attrs.field(default=0.5, validator=attrs.validators.ge(0.0))
    wait: Callable[[int], float] | None = None
    rng: random.Random = attrs.field(factory=random.Random, eq=False)
    sleep: Callable[[float], None] = time.sleep
    async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.time

    @classmethod
    def from_config(cls, config: Config) -> RetryPolicy:
        """The policy of ``[provider]``."""
        provider = config.provider
        return cls(max_attempts=provider.max_attempts, max_wait_s=provider.retry_max_wait_s)

    def backoff_s(self, failed_attempt: int) -> float:
        """The wait after attempt ``failed_attempt`` when the server asked for none."""
        if self.wait is not None:
            return float(self.wait(failed_attempt))
        ceiling = self.initial_wait_s * 2.0 ** (failed_attempt - 1)
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)

    def wait_s(self, attempt: Attempt, number: int) -> float:
        """The wait after ``attempt``, the ``number``-th, capped at ``max_wait_s``."""
        asked = None
        if attempt.response is not None:
            asked = retry_after_s(attempt.response.headers, self.clock())
        wait = asked if asked is not None else self.backoff_s(number)
        return min(max(0.0, wait), self.max_wait_s)


#: Where each format's answer is: a successful reply without it (or with an empty
#: ``choices``) is malformed, and tried again like a 5xx.
ANSWER_KEYS: Mapping[str, str] = {
    "openai_chat": "choices",
    "openai_responses": "output",
    "anthropic": "content",
}


@attrs.frozen(kw_only=True)
class Attempt:
    """One try: the response, or else the transport error that stopped it.

    :param data: a successful response's JSON object.
    :param malformed: why a successful (2xx) response is no answer (not JSON, not an object,
        no ``choices``…): it is retried like a server error.
    """

    response: httpx.Response | None = None
    error: httpx.HTTPError | None = None
    data: dict[str, Any] | None = None
    malformed: str | None = None

    @classmethod
    def of(cls, api: str, response: httpx.Response) -> Attempt:
        """The attempt that got ``response``, its body read when it succeeded."""
        if response.status_code >= 400:
            return cls(response=response)
        try:
            data: Any = response.json()
        except ValueError as exc:
            return cls(response=response, malformed=f"reply is not JSON: {exc}")
        if not isinstance(data, dict):
            return cls(response=response, malformed="reply is not a JSON object")
        key = ANSWER_KEYS.get(str(api))
        answer = data.get(key) if key is not None else None
        if key is not None and (not isinstance(answer, list) or (key == "choices" and not answer)):
            found = "empty" if isinstance(answer, list) else "missing"
            return cls(response=response, malformed=f"reply has no answer ({key!r} {found})")
        return cls(response=response, data=data)

    @property
    def retryable(self) -> bool:
        if self.malformed is not None:
            return True
        if self.response is not None:
            return self.response.status_code in RETRY_STATUSES
        return isinstance(self.error, RETRY_ERRORS)

    @property
    def reached(self) -> bool:
        """The request got to the server (or may have: a read timeout)."""
        return self.response is not None or not isinstance(self.error, NOT_SENT_ERRORS)


def _plural(count: int) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


def _result(api: str, last: Attempt, attempts: int, reached: bool) -> SubmitResult:
    retried = f" (after {_plural(attempts)})" if attempts > 1 else ""
    response = last.response
    if response is None:
        error = last.error
        if isinstance(error, httpx.TimeoutException):
            detail = f"timeout after {_plural(attempts)} ({type(error).__name__})"
        else:
            detail = f"{type(error).__name__}: {error}{retried}"
        return SubmitResult(sent=reached, status="error", detail=detail)
    if response.status_code >= 400:
        body = response.text[:ERROR_BODY_CHARS]
        detail = f"HTTP {response.status_code}: {body}{retried}"
        return SubmitResult(sent=True, status="error", detail=detail)
    if last.malformed is not None or last.data is None:
        detail = f"{last.malformed or 'reply is not a JSON object'}{retried}"
        return SubmitResult(sent=True, status="error", detail=detail)
    data = last.data
    answer = parse_answer(api, data)
    return SubmitResult(
        sent=True,
        status="ok",
        text=answer.text,
        tool_calls=answer.tool_calls,
        usage=answer.usage,
        raw=data,
    )


@attrs.define(kw_only=True, eq=False)
class _Tally:
    """What the attempts of one request did, across retries."""

    attempts: int = 0
    reached: bool = False

    def record(self, attempt: Attempt) -> Attempt:
        self.attempts += 1
        self.reached = self.reached or attempt.reached
        return attempt


@attrs.define(kw_only=True, eq=False)
class ProviderHttp:
    """POSTs a request body with retries, from sync code or from an event loop.

    It keeps one ``httpx.Client`` and, per event loop, one ``httpx.AsyncClient`` (an async
    client's connections belong to the loop that opened them).

    :param timeout_s: each attempt's timeout.
    :param retry: the retry policy.
    :param transport: the ``httpx`` transport of the sync client; an ``httpx.MockTransport``
        serves the async client too.
    :param async_transport: the transport of the async client.
    """

    timeout_s: float = 60.0
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    transport: httpx.BaseTransport | None = None
    async_transport: httpx.AsyncBaseTransport | None = None
    _client: httpx.Client | None = attrs.field(default=None, init=False)
    # Per event loop: the bot's loop answers turns while the learners' loop thread asks the
    # learning model, often of the same endpoint (one shared client); with one client for both,
    # each switch of loops built a new client, its SSL context with the CA bundle included.
    _async_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = attrs.field(
        factory=dict, init=False
    )

    def _retrying_options(self) -> dict[str, Any]:
        policy = self.retry

        def wait(state: tenacity.RetryCallState) -> float:
            if state.outcome is None:  # tenacity only waits after an attempt
                return 0.0
            attempt: Attempt = state.outcome.result()
            return policy.wait_s(attempt, state.attempt_number)

        return {
            "stop": tenacity.stop_after_attempt(policy.max_attempts),
            "wait": wait,
            "retry": tenacity.retry_if_result(lambda attempt: attempt.retryable),
            # Out of attempts: the last one is the answer, not a RetryError.
            "retry_error_callback": lambda state: state.outcome.result(),
        }

    def _sync(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout_s, transport=self.transport)
        return self._client

    def _async(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            self._forget_closed_loops()
            transport = self.async_transport
            if transport is None and isinstance(self.transport, httpx.AsyncBaseTransport):
                transport = self.transport
            client = httpx.AsyncClient(timeout=self.timeout_s, transport=transport)
            self._async_clients[loop] = client
        return client

    def post(self, api: str, url: str, content: bytes, headers: Mapping[str, str]) -> SubmitResult:
        """POST ``content`` to ``url``, retrying as the policy says; read the reply as ``api``."""
        tally = _Tally()
        client = self._sync()

        def attempt() -> Attempt:
            try:
                response = client.post(url, content=content, headers=headers)
            except httpx.HTTPError as exc:
                return tally.record(Attempt(error=exc))
            return tally.record(Attempt.of(api, response))

        first = attempt()
        if not first.retryable or self.retry.max_attempts <= 1:
            return _result(api, first, tally.attempts, tally.reached)
        retrying = tenacity.Retrying(sleep=self.retry.sleep, **self._retrying_options())
        last: Attempt = retrying(_made_first(first, attempt))
        return _result(api, last, tally.attempts, tally.reached)

    async def apost(
        self, api: str, url: str, content: bytes, headers: Mapping[str, str]
    ) -> SubmitResult:
        """:meth:`post` on the event loop."""
        tally = _Tally()
        client = self._async()

        async def attempt() -> Attempt:
            try:
                response = await client.post(url, content=content, headers=headers)
            except httpx.HTTPError as exc:
                return tally.record(Attempt(error=exc))
            return tally.record(Attempt.of(api, response))

        first = await attempt()
        if not first.retryable or self.retry.max_attempts <= 1:
            return _result(api, first, tally.attempts, tally.reached)
        retrying = tenacity.AsyncRetrying(sleep=self.retry.async_sleep, **self._retrying_options())
        last: Attempt = await retrying(_made_first_async(first, attempt))
        return _result(api, last, tally.attempts, tally.reached)

    def close(self) -> None:
        """Close the sync client's connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close the connections of the running loop's async client (each loop's client is
        closed on its own loop); the clients of loops closed since are dropped."""
        client = self._async_clients.pop(asyncio.get_running_loop(), None)
        self._forget_closed_loops()
        if client is not None:
            await client.aclose()

    def _forget_closed_loops(self) -> None:
        """Drop the async clients of closed loops (their connections went with the loop)."""
        for closed in [known for known in self._async_clients if known.is_closed()]:
            del self._async_clients[closed]


# The first attempt is made before tenacity is set up: most requests are answered at once, and
# only one that is to be retried pays for the retry loop. The loop then starts from that attempt
# (its first "attempt" is the one already made), so its count, waits and stop are as if it had
# made it.


def _made_first(first: Attempt, attempt: Callable[[], Attempt]) -> Callable[[], Attempt]:
    made = [first]

    def again() -> Attempt:
        return made.pop() if made else attempt()

    return again


def _made_first_async(
    first: Attempt, attempt: Callable[[], Awaitable[Attempt]]
) -> Callable[[], Awaitable[Attempt]]:
    made = [first]

    async def again() -> Attempt:
        return made.pop() if made else await attempt()

    return again


def _http_of(client: ProviderClient) -> ProviderHttp:
    return ProviderHttp(
        timeout_s=client.timeout_s,
        retry=client.retry,
        transport=client.transport,
        async_transport=client.async_transport,
    )


@attrs.define(kw_only=True, eq=False)
class ProviderClient:
    """What a contrib client of one provider API is: an endpoint, a key, and the plumbing that
    posts a request's exact body bytes to it, sync or async; also a plugin (register an instance
    of a subclass).

    A subclass names the formats it sends (:attr:`handled`), how a request of another format is
    refused (:attr:`other_formats`), the default endpoint and the key's environment variable
    (:attr:`default_base_url`, :attr:`key_variable`), and its headers (:meth:`headers`).

    :param base_url: the API's base URL.
    :param api_key: the key; ``""`` sends none.
    :param timeout_s: each attempt's timeout.
    :param retry: when to try again and how long to wait (:class:`RetryPolicy`).
    :param transport: an ``httpx`` transport (tests pass ``httpx.MockTransport``, which serves
        the async path too).
    :param async_transport: an ``httpx`` transport for the async path only.
    """

    handled: ClassVar[tuple[ProviderApi, ...]] = ()
    other_formats: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""
    key_variable: ClassVar[str] = ""

    base_url: str
    api_key: str = attrs.field(default="", repr=False)
    timeout_s: float = 60.0
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    transport: httpx.BaseTransport | None = None
    async_transport: httpx.AsyncBaseTransport | None = None
    _http: ProviderHttp = attrs.field(
        default=attrs.Factory(_http_of, takes_self=True), init=False, repr=False
    )

    def headers(self) -> dict[str, str]:
        """The headers of every request: the content type and the key."""
        raise NotImplementedError

    def _refusal(self, request: ProviderRequest) -> SubmitResult | None:
        if request.api not in self.handled:
            return SubmitResult(
                sent=False,
                status="error",
                detail=f"{request.api.value} is not {self.other_formats}",
            )
        if not self.api_key and self.base_url == self.default_base_url:
            return SubmitResult(
                sent=False,
                status="error",
                detail="no API key: set provider.api_key, $PROMPTWEAVE_API_KEY or "
                f"${self.key_variable}",
            )
        return None

    def submit(self, request: ProviderRequest) -> SubmitResult:
        """Post ``request`` (retrying) and read the reply; failures become an ``error`` result."""
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        return self._http.post(
            request.api.value, self.base_url + request.path, request.body_bytes(), self.headers()
        )

    async def asubmit(self, request: ProviderRequest) -> SubmitResult:
        """:meth:`submit` on the event loop (``httpx.AsyncClient``, ``asyncio.sleep``)."""
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        return await self._http.apost(
            request.api.value, self.base_url + request.path, request.body_bytes(), self.headers()
        )

    def close(self) -> None:
        """Close the sync connection pool."""
        self._http.close()

    async def aclose(self) -> None:
        """Close the async connection pool of the running loop."""
        await self._http.aclose()

    @hookimpl
    def submit_request(self, request: ProviderRequest, config: Config) -> SubmitResult | None:
        if request.api not in self.handled:
            return None
        return self.submit(request)

    @hookimpl
    def submit_request_async(
        self, request: ProviderRequest, config: Config
    ) -> Coroutine[Any, Any, SubmitResult] | None:
        if request.api not in self.handled:
            return None
        return self.asubmit(request)


C = TypeVar("C", bound=ProviderClient)


def shared_client(described: C) -> C:
    """The one client of ``described``'s class and settings: one connection pool per kind and
    endpoint, so that the module-level hooks' requests reuse connections and TLS sessions."""
    policy = described.retry
    key = (
        type(described),
        described.base_url,
        described.api_key,
        described.timeout_s,
        policy.max_attempts,
        policy.max_wait_s,
    )
    return cast(C, _shared_client(key))


@functools.lru_cache(maxsize=8)
def _shared_client(key: tuple[Any, ...]) -> ProviderClient:
    kind, base_url, api_key, timeout_s, max_attempts, max_wait_s = key
    client: ProviderClient = kind(
        base_url=base_url,
        api_key=api_key,
        timeout_s=timeout_s,
        retry=RetryPolicy(max_attempts=max_attempts, max_wait_s=max_wait_s),
    )
    return client
