"""The records of the messages a request carries: :class:`PromptMessage`, and the images that go
inline with it (:class:`ImageLimits`, :class:`FetchedImage`).

A wording hint (:class:`WordingHint`) becomes such a message. The plugin contract and every stage after the session read carry them, so they sit in a module of
records alone (``docs/architecture.md``, "Layers"); building the messages is
:mod:`promptweave.messages.sequence`, choosing and fetching images :mod:`promptweave.messages.images`.
"""

from __future__ import annotations

import base64

import attrs

from promptweave.config import ProviderConfig

__all__ = [
    "WORDING_HINT_KINDS",
    "WORDING_HINT_SOURCE",
    "FetchedImage",
    "ImageLimits",
    "PromptMessage",
    "WordingHint",
]

#: The kinds of the built-in wording hints; a plugin may give a kind of its own.
WORDING_HINT_KINDS = ("repeat", "opening", "closing", "scene_tone")
#: The ``source`` of a wording hint's message is this prefix, a colon and the hint's kind.
WORDING_HINT_SOURCE = "wording_hint"


@attrs.frozen(kw_only=True)
class PromptMessage:
    """One message of the request.

    :param role: ``user`` or ``assistant``.
    :param content: the text sent to the provider.
    :param source: what it was built from: ``ambient``, ``summary``, ``history``, ``current``, or a
        plugin's label.
    :param images: image URLs the message carries, for providers that accept images.
    :param api_content: the API-only sidecar: the exact text sent in place of ``content`` (clean
        content plus per-turn context, see ``docs/turn_context.md``). It never reaches a provider
        as a field; request builders substitute it.
    :param parts: durable text parts sent after the content and images (notes of a multimodal
        turn); unlike the sidecar they are part of the message and persisted with it.
    :param source_token: identifies the ambient excerpt, so the injection snapshot can tell whether
        it survived the budget (a user quoting ``【群环境摘录】`` does not count).
    """

    role: str
    content: str
    source: str = "history"
    images: tuple[str, ...] = ()
    api_content: str | None = None
    parts: tuple[str, ...] = ()
    source_token: str | None = None


@attrs.frozen(kw_only=True)
class ImageLimits:
    """What an image fetch may return.

    :param max_bytes: the largest image accepted.
    :param media_types: the accepted media types (checked against the bytes, not the headers).
    :param timeout_s: the download timeout.
    """

    max_bytes: int = 5 * 1024 * 1024
    media_types: tuple[str, ...] = ("image/jpeg", "image/png", "image/gif", "image/webp")
    timeout_s: float = 20.0

    @classmethod
    def from_config(cls, config: ProviderConfig) -> ImageLimits:
        return cls(
            max_bytes=config.image_max_bytes,
            media_types=config.image_types,
            timeout_s=config.timeout_s,
        )


@attrs.frozen(kw_only=True)
class FetchedImage:
    """An image ready to be sent inline."""

    url: str
    media_type: str
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"


def _kind(value: str) -> str:
    kind = str(value).strip()
    if not kind or any(char.isspace() for char in kind):
        raise ValueError(f"a wording hint's kind is one word, got {value!r}")
    return kind


@attrs.frozen(kw_only=True)
class WordingHint:
    """One wording hint of a turn.

    :param kind: ``repeat``, ``opening``, ``closing``, ``scene_tone``
        (:data:`WORDING_HINT_KINDS`), or a plugin's own word (no spaces).
    :param text: what the model reads (persona-pack text for the built-ins); sanitized like a
        section block and cut at :data:`promptweave.messages.wording.WORDING_HINT_CHARS` when it
        is merged.
    :param reason: why it was given, for the trace (``"same_reply x3"``); never sent.
    :param plugin: the plugin that gave it; the hook's caller fills it in.
    """

    kind: str = attrs.field(converter=_kind)
    text: str
    reason: str = ""
    plugin: str = ""

    @property
    def source(self) -> str:
        """The ``source`` of the message the hint rides: ``wording_hint:<kind>``."""
        return f"{WORDING_HINT_SOURCE}:{self.kind}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "plugin": self.plugin, "reason": self.reason, "text": self.text}
