"""The default image fetcher: schemes, size and type limits."""

from __future__ import annotations

import base64
import http.server
import threading

import pytest
from support_turn_context import PNG_BYTES, PNG_DATA_URL

from promptweave import ImageFetchError, ImageLimits
from promptweave.messages.images import (
    fetch_image_default,
    is_vision_url,
    merge_image_urls,
    sniff_media_type,
    vision_image_urls,
)


@pytest.fixture
def image_server():
    """A local HTTP server: /ok.png is a PNG, /big.png is oversized, /page is HTML."""
    big = PNG_BYTES + b"\0" * 4096

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body, kind = {
                "/ok.png": (PNG_BYTES, "image/png"),
                "/big.png": (big, "image/png"),
                "/page": (b"<html>not an image</html>", "text/html"),
            }.get(self.path, (b"", "text/plain"))
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_fetches_an_http_image(image_server):
    image = fetch_image_default(f"{image_server}/ok.png", ImageLimits())
    assert (image.media_type, image.data) == ("image/png", PNG_BYTES)
    assert image.data_url() == PNG_DATA_URL


def test_refuses_an_oversized_image(image_server):
    with pytest.raises(ImageFetchError, match="larger than 1000 bytes"):
        fetch_image_default(f"{image_server}/big.png", ImageLimits(max_bytes=1000))


def test_refuses_what_is_not_an_image_whatever_the_headers(image_server):
    with pytest.raises(ImageFetchError, match="not a PNG, JPEG, GIF or WebP"):
        fetch_image_default(f"{image_server}/page", ImageLimits())


def test_refuses_a_type_outside_the_accepted_ones():
    with pytest.raises(ImageFetchError, match="image/png is not accepted"):
        fetch_image_default(PNG_DATA_URL, ImageLimits(media_types=("image/jpeg",)))


def test_download_failure_is_an_image_fetch_error(image_server):
    with pytest.raises(ImageFetchError, match="download failed"):
        fetch_image_default(f"{image_server}/missing.png", ImageLimits())


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.net/a.png", "cat.png"])
def test_refuses_other_schemes(url):
    with pytest.raises(ImageFetchError, match="unsupported URL scheme"):
        fetch_image_default(url, ImageLimits())


def test_data_urls_are_decoded_within_limits():
    assert fetch_image_default(PNG_DATA_URL, ImageLimits()).data == PNG_BYTES
    huge = "data:image/png;base64," + base64.b64encode(PNG_BYTES * 100).decode()
    with pytest.raises(ImageFetchError, match="larger than"):
        fetch_image_default(huge, ImageLimits(max_bytes=200))
    with pytest.raises(ImageFetchError, match="not base64"):
        fetch_image_default("data:image/png,raw", ImageLimits())
    with pytest.raises(ImageFetchError, match="not valid base64"):
        fetch_image_default("data:image/png;base64,!!!!", ImageLimits())


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\xff\xd8\xff\xe0", "image/jpeg"),
        (b"GIF89a..", "image/gif"),
        (b"RIFF\0\0\0\0WEBPVP8 ", "image/webp"),
        (b"%PDF-1.7", None),
    ],
)
def test_sniffs_the_type_from_the_bytes(head, kind):
    assert sniff_media_type(head) == kind


def test_merge_image_urls_keeps_order_and_drops_repeats():
    assert merge_image_urls(["a", " B "], ["b", "", "c"]) == ("a", "B", "c")


@pytest.mark.parametrize(
    "url",
    [
        "https://img.example.net/cat-1.jpg",
        "HTTP://IMG.EXAMPLE.NET/CAT.JPG",
        "Https://img.example.net:8443/a.png?x=1",
        "http://[::1]/a.png",
        "  https://img.example.net/padded.jpg  ",
    ],
)
def test_http_urls_with_a_host_are_vision_urls(url):
    assert is_vision_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "file:///etc/passwd",
        "abc123.image",
        "[图片]",
        "data:image/png;base64,AAAA",
        "ftp://img.example.net/a.png",
        "javascript:alert(1)",
        "http://",
        "https:///no-host.jpg",
        "https://:443/no-host.jpg",
        "https://img.example.net:99999/bad-port.jpg",
        "https://img.example.net/a b.jpg",
        "https://img.example.net/a\x00.jpg",
        "http://[broken/a.jpg",
        "//img.example.net/no-scheme.jpg",
    ],
)
def test_everything_else_is_not_a_vision_url(url):
    assert not is_vision_url(url)


def test_vision_image_urls_merge_and_keep_only_http_urls():
    merged = vision_image_urls(
        ["file:///etc/passwd", "https://a.example/1.jpg", "abc.image"],
        ["HTTPS://A.EXAMPLE/1.JPG", " https://a.example/2.jpg "],
    )
    assert merged == ("https://a.example/1.jpg", "https://a.example/2.jpg")
