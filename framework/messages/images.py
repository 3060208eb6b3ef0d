"""Images of a request: which go where, and fetching those a provider needs inline.

``docs/design.md#images``: when the provider declares image support, the timeline's recent images go
in one user message before the current one, and the current message's images (its own and those of
the message it quotes) go with it; a text provider downloads nothing and sees ``[图片]``. Only valid
HTTP(S) URLs are images a request carries (:func:`is_vision_url`); any other entry of a message's
``images`` (a platform file id, :data:`IMAGE_WITHOUT_URL`, a ``file:`` path) still marks the message
``[图片]`` but never reaches a provider or a fetcher. Fetching is a hook (``fetch_image``) with size
and type limits; a failed fetch degrades that image to ``[图片]`` and is traced, it never fails the
turn.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Iterable

from promptweave.errors import PromptweaveError
from promptweave.messages.prompt_message import FetchedImage, ImageLimits
from promptweave.text.rules import IMAGE_MARK

__all__ = [
    "IMAGE_WITHOUT_URL",
    "ImageFetchError",
    "fetch_image_default",
    "is_vision_url",
    "merge_image_urls",
    "sniff_media_type",
    "vision_image_urls",
]

#: The entry of :attr:`promptweave.ChatMessage.images` for an image the platform gave no usable URL
#: for (a OneBot ``[CQ:image,file=abc.image]`` without ``url``): the message still shows
#: ``[图片]``, and the entry is never a vision image since it is not a URL.
IMAGE_WITHOUT_URL = IMAGE_MARK
_VISION_SCHEMES = frozenset({"http", "https"})

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
USER_AGENT = "promptweave-image-fetcher"


class ImageFetchError(PromptweaveError):
    """An image could not be fetched within the limits; the message says why."""


def sniff_media_type(data: bytes) -> str | None:
    """The image type of ``data`` from its first bytes (PNG, JPEG, GIF, WebP), else ``None``."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def merge_image_urls(*groups: Iterable[str]) -> tuple[str, ...]:
    """Concatenate URL groups in order, dropping blanks and case-insensitive repeats."""
    seen: set[str] = set()
    merged: list[str] = []
    for group in groups:
        for url in group:
            url = url.strip()
            if url and url.lower() not in seen:
                seen.add(url.lower())
                merged.append(url)
    return tuple(merged)


def is_vision_url(url: str) -> bool:
    """Whether ``url`` may be sent to a provider as an image: an ``http`` or ``https`` URL (the
    scheme in any case) naming a host, without whitespace or control characters.

    Only valid HTTP(S) images are kept (``docs/design.md#images``): anything else (``file:`` paths,
    platform file ids, ``data:`` URLs, the ``[图片]`` placeholder) stays a ``[图片]`` mark in the
    text.
    """
    candidate = url.strip()
    if not candidate or any(ch.isspace() or not ch.isprintable() for ch in candidate):
        return False
    try:
        parts = urllib.parse.urlsplit(candidate)
        host, _port = parts.hostname, parts.port  # reading .port raises on a malformed port
    except ValueError:
        return False
    return parts.scheme.lower() in _VISION_SCHEMES and bool(host)


def vision_image_urls(*groups: Iterable[str]) -> tuple[str, ...]:
    """The valid image URLs of the groups (:func:`is_vision_url`), merged like
    :func:`merge_image_urls`: in order, blanks and case-insensitive repeats dropped."""
    return tuple(url for url in merge_image_urls(*groups) if is_vision_url(url))


def _checked(url: str, data: bytes, limits: ImageLimits) -> FetchedImage:
    if len(data) > limits.max_bytes:
        raise ImageFetchError(f"image is larger than {limits.max_bytes} bytes")
    media_type = sniff_media_type(data)
    if media_type is None:
        raise ImageFetchError("not a PNG, JPEG, GIF or WebP image")
    if media_type not in limits.media_types:
        raise ImageFetchError(f"image type {media_type} is not accepted")
    return FetchedImage(url=url, media_type=media_type, data=data)


def _decode_data_url(url: str, limits: ImageLimits) -> FetchedImage:
    header, _, payload = url.partition(",")
    if not header.endswith(";base64"):
        raise ImageFetchError("data URL is not base64")
    # 4 base64 characters carry 3 bytes: refuse before decoding something too large.
    if len(payload) * 3 // 4 > limits.max_bytes + 2:
        raise ImageFetchError(f"image is larger than {limits.max_bytes} bytes")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageFetchError(f"data URL is not valid base64: {exc}") from exc
    return _checked(url, data, limits)


def fetch_image_default(url: str, limits: ImageLimits) -> FetchedImage:
    """Fetch an ``http(s)`` or ``data:`` image within ``limits``.

    Other schemes (``file:`` and the like) are refused: a chat message must never make the bot
    read local files. At most ``max_bytes + 1`` bytes are read, so an oversized image is never
    fully downloaded.

    :raises ImageFetchError: the scheme, size, type or download failed.
    """
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme == "data":
        return _decode_data_url(url, limits)
    if scheme not in ("http", "https"):
        raise ImageFetchError(f"unsupported URL scheme {scheme or '(none)'!r}")
    # urllib.request brings http.client, email and ssl: imported by the first fetch, not at
    # start-up (docs/performance.md).
    from urllib.error import URLError
    from urllib.request import Request, urlopen

    request = Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urlopen(request, timeout=limits.timeout_s) as response:
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limits.max_bytes:
                raise ImageFetchError(f"image is larger than {limits.max_bytes} bytes")
            data = response.read(limits.max_bytes + 1)
    except ImageFetchError:
        raise
    except (URLError, OSError, ValueError) as exc:
        raise ImageFetchError(f"download failed: {exc}") from exc
    return _checked(url, data, limits)
