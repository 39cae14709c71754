"""Image transforms on the download routes (``?width=&height=&fit=&format=&quality=``), on both backends: the
four fit modes, formats and quality, EXIF orientation applied and metadata dropped, the cache beside the file
(computed once, removed with the file), the ETag of the bytes, and every hostile or unsupported source
answered 400 with nothing cached."""

from __future__ import annotations

import contextlib
import functools
import io
import struct
import threading
import time
import zlib
from urllib.parse import urlsplit

import pytest
from PIL import Image

from trellis_storage import variants
from trellis_storage.decode_gate import Saturated
from trellis_storage.variants import SingleFlight


def picture(size=(1200, 800), fmt="JPEG", mode="RGB", orientation: int | None = None, color=(200, 30, 30)) -> bytes:
    image = Image.new(mode, size, color if mode != "RGBA" else (*color, 255))
    # A marker in the top-left corner, to see where it ends up after rotations.
    image.paste((0, 0, 255) if mode == "RGB" else (0, 0, 255, 255), (0, 0, size[0] // 4, size[1] // 4))
    out = io.BytesIO()
    options = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        exif[0x010F] = "Camera maker"  # metadata that must not survive
        options["exif"] = exif.tobytes()
    image.save(out, fmt, **options)
    return out.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` but holds a few bytes: a decompression bomb's shape."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


@pytest.fixture()
def image_id(storage, upload, user):
    def store(content: bytes, name: str = "photo.jpg", **form) -> str:
        response = upload(user.headers, content, name, **form)
        assert response.status_code == 201, response.get_json()
        return response.get_json()["id"]

    return store


def opened(response) -> Image.Image:
    return Image.open(io.BytesIO(response.data))


def test_resize_keeps_the_format_applies_orientation_and_drops_metadata(client, storage, user, image_id):
    file_id = image_id(picture(orientation=6))  # stored 1200x800, shown rotated: 800x1200
    response = client.get(f"/storage/download/{file_id}?width=100", headers=user.headers)
    assert response.status_code == 200, response.get_json()
    assert response.content_type == "image/jpeg"
    etag = response.headers["ETag"].strip('"')
    source_sha = client.get(f"/storage/file/{file_id}", headers=user.headers).get_json()["sha256"]
    assert len(etag) == 64 and etag != source_sha  # the source's hash and the rendering's, together
    assert response.headers["Content-Length"] == str(len(response.data))
    image = opened(response)
    assert image.format == "JPEG" and image.size == (100, 150)
    assert not image.getexif() and "icc_profile" not in image.info
    # The blue corner was top-left as stored; turned a quarter clockwise it is top-right.
    assert image.getpixel((95, 5))[2] > 200 and image.getpixel((5, 5))[2] < 100
    assert b"Camera maker" not in response.data


@pytest.mark.parametrize(
    ("fit", "size"),
    [("inside", (100, 67)), ("cover", (100, 100)), ("contain", (100, 100)), ("fill", (100, 100))],
)
def test_fit_modes(client, storage, user, image_id, fit, size):
    file_id = image_id(picture((1200, 800)))
    response = client.get(
        f"/storage/download/{file_id}?width=100&height=100&fit={fit}&format=png", headers=user.headers
    )
    assert response.status_code == 200 and response.content_type == "image/png"
    image = opened(response).convert("RGBA")
    assert image.size == size
    top_middle = image.getpixel((50, 2))
    if fit == "contain":  # letterboxed: transparent bands above and below
        assert top_middle[3] == 0 and image.getpixel((50, 50))[3] == 255
    else:
        assert top_middle[3] == 255
    if fit == "cover":  # cropped at the sides: the blue quarter is narrower than in a stretch
        assert image.getpixel((2, 2))[2] > 200 and image.getpixel((20, 2))[2] < 100
    if fit == "fill":
        assert image.getpixel((20, 20))[2] > 200


def test_formats_and_quality(client, storage, user, image_id):
    file_id = image_id(picture((600, 400)))
    webp = client.get(f"/storage/download/{file_id}?format=webp&width=300", headers=user.headers)
    assert webp.content_type == "image/webp" and opened(webp).format == "WEBP"
    noisy = io.BytesIO()
    Image.effect_noise((600, 400), 80).convert("RGB").save(noisy, "JPEG", quality=95)
    noisy_id = image_id(noisy.getvalue(), "noise.jpg")
    low = client.get(f"/storage/download/{noisy_id}?quality=10", headers=user.headers)
    high = client.get(f"/storage/download/{noisy_id}?quality=95", headers=user.headers)
    assert low.status_code == high.status_code == 200
    assert len(low.data) * 2 < len(high.data)
    assert low.headers["ETag"] != high.headers["ETag"]
    gif = io.BytesIO()
    Image.new("P", (40, 20)).save(gif, "GIF")
    gif_id = image_id(gif.getvalue(), "anim.gif")
    as_png = client.get(f"/storage/download/{gif_id}?width=20", headers=user.headers)
    assert as_png.content_type == "image/png" and opened(as_png).size == (20, 10)


def test_a_transform_is_cached_beside_the_file_and_removed_with_it(client, storage, user, image_id):
    file_id = image_id(picture())
    blob = f"{file_id[:2]}/{file_id[2:4]}/{file_id}"
    first = client.get(f"/storage/download/{file_id}?width=64&format=webp", headers=user.headers)
    variants = [k for k in storage.keys() if k != blob]
    assert len(variants) == 1 and variants[0].startswith(f"{blob}.v")
    second = client.get(f"/storage/download/{file_id}?format=webp&width=64", headers=user.headers)
    assert second.data == first.data and second.headers["ETag"] == first.headers["ETag"]
    assert [k for k in storage.keys() if k != blob] == variants  # served from the cache, nothing new

    etag = first.headers["ETag"]
    not_modified = client.get(
        f"/storage/download/{file_id}?width=64&format=webp", headers={**user.headers, "If-None-Match": etag}
    )
    assert not_modified.status_code == 304 and not not_modified.data
    head = client.head(f"/storage/download/{file_id}?width=64&format=webp", headers=user.headers)
    assert head.status_code == 200 and head.headers["Content-Length"] == str(len(first.data)) and not head.data

    assert client.delete(f"/storage/file/{file_id}", headers=user.headers).status_code == 200
    assert storage.keys() == []


def test_public_and_signed_urls_transform_too(client, storage, user, image_id):
    public_id = image_id(picture(), "pub.jpg", isPublic=True)
    url = client.get(f"/storage/getUrl/{public_id}?width=50&format=webp").get_json()["url"]
    assert "width=50" in url
    public = client.get(path_of(url))
    assert public.status_code == 200 and public.content_type == "image/webp"
    assert opened(public).width == 50 and public.headers["Cache-Control"] == "public, max-age=86400"

    private_id = image_id(picture(), "private.jpg")
    signed = client.get(f"/storage/getUrl/{private_id}?width=40&format=png", headers=user.headers).get_json()
    assert "/storage/signed/" in signed["url"]  # Trellis's own, on S3 too: it transforms
    answer = client.get(path_of(signed["url"]))
    assert answer.status_code == 200 and opened(answer).size == (40, 27)
    assert answer.headers["Cache-Control"] == "private, no-store"
    assert client.get(f"/storage/public/{private_id}/x.jpg?width=40").status_code == 404


@pytest.mark.parametrize(
    "query",
    ["width=0", "width=4097", "height=-3", "fit=stretch", "format=gif", "quality=0", "quality=101", "width=abc"],
)
def test_bad_parameters_are_400(client, storage, user, image_id, query):
    file_id = image_id(picture((60, 40)))
    response = client.get(f"/storage/download/{file_id}?{query}", headers=user.headers)
    assert response.status_code == 400 and response.get_json()["name"] == "INVALID_ARGUMENTS"


def test_hostile_or_unsupported_sources_are_400_and_nothing_is_cached(client, storage, user, image_id):
    jpeg = picture((800, 600))
    cases = {
        "text": image_id(b"just some text\n", "notes.txt"),
        "bomb": image_id(png_claiming(10_000, 10_000), "bomb.png"),  # 100 megapixels claimed
        "over 50 MP": image_id(png_claiming(8_000, 7_000), "large.png"),
        "truncated": image_id(jpeg[: len(jpeg) // 2], "cut.jpg"),
        "garbage png": image_id(b"\x89PNG\r\n\x1a\n" + b"\x00" * 200, "junk.png"),
    }
    thin = image_id(picture((1, 100)), "thin.jpg")
    before = storage.keys()
    for what, file_id in cases.items():
        response = client.get(f"/storage/download/{file_id}?width=100&format=webp", headers=user.headers)
        assert response.status_code == 400, (what, response.status_code, response.data[:200])
        assert response.get_json()["name"] == "INVALID_ARGUMENTS", what
    too_tall = client.get(f"/storage/download/{thin}?width=4096", headers=user.headers)  # 409,600 px high
    assert too_tall.status_code == 400 and "4096" in too_tall.get_json()["message"]
    assert storage.keys() == before
    plain = client.get(f"/storage/download/{cases['text']}", headers=user.headers)
    assert plain.status_code == 200 and plain.data == b"just some text\n"  # without a transform: the file as is


@functools.cache
def grey_png(side: int) -> bytes:
    """A real ``side`` x ``side`` grey PNG: a few KB that decode to ``side``² bytes."""
    out = io.BytesIO()
    Image.new("L", (side, side), 128).save(out, "PNG", optimize=True)
    return out.getvalue()


def test_what_the_header_decides_is_refused_without_decoding(client, storage, user, image_id):
    """49 MP (under the 50 MP limit) asked without a size: the result would be 7000 px a side, a 400 read from
    the header (the answer names the limit), for every quality; nothing is cached."""
    file_id = image_id(grey_png(7000), "grey.png")
    before = storage.keys()
    for quality in (1, 50, 100):
        started = time.monotonic()
        response = client.get(f"/storage/download/{file_id}?format=webp&quality={quality}", headers=user.headers)
        assert response.status_code == 400, response.status_code
        assert "7000x7000" in response.get_json()["message"] and "4096" in response.get_json()["message"]
        assert time.monotonic() - started < 2.0  # decoding and encoding 49 MP would take seconds
    assert client.get(f"/storage/download/{file_id}?format=png", headers=user.headers).status_code == 400
    assert storage.keys() == before


def test_a_png_orientation_found_after_its_pixels_is_applied(client, storage, user, image_id):
    """A PNG's eXIf chunk may follow its pixels, where the header check cannot see it: the size is planned again
    once it is known, so the picture is turned and scaled as if it had been read first."""
    out = io.BytesIO()
    Image.new("RGB", (120, 80), (200, 30, 30)).save(out, "PNG")
    exif = Image.Exif()
    exif[0x0112] = 6
    data = exif.tobytes()
    chunk = struct.pack(">I", len(data)) + b"eXIf" + data + struct.pack(">I", zlib.crc32(b"eXIf" + data))
    content = out.getvalue()
    iend = content.rindex(b"IEND") - 4
    file_id = image_id(content[:iend] + chunk + content[iend:], "late.png")
    response = client.get(f"/storage/download/{file_id}?width=40", headers=user.headers)
    assert response.status_code == 200 and opened(response).size == (40, 60)


def test_decoding_is_bounded_by_memory_and_jpeg_is_reduced_on_load(client, storage, user, image_id):
    """An RGB PNG of 49 MP (claimed: the header is all that is read) to 4000 px would need more memory than one
    decode may take: 400 naming it. A large JPEG is decoded at 1/8 scale for a small result, so it passes."""
    heavy = image_id(png_claiming(7000, 7000), "heavy.png")
    response = client.get(f"/storage/download/{heavy}?width=4000&format=webp", headers=user.headers)
    assert response.status_code == 400 and "MiB" in response.get_json()["message"], response.get_json()
    large = picture((6000, 6000))
    large_id = image_id(large, "large.jpg")
    refused = client.get(f"/storage/download/{large_id}?width=4000", headers=user.headers)  # no reduction covers it
    assert refused.status_code == 400 and "MiB" in refused.get_json()["message"]
    small = client.get(f"/storage/download/{large_id}?width=400&format=webp", headers=user.headers)
    assert small.status_code == 200 and opened(small).size == (400, 400)


def test_past_the_decode_line_the_answer_is_503_with_retry_after(client, storage, user, image_id):
    """Every decode slot and place in line taken (held here as requests would): a decode is 503 with Retry-After
    at once, what the header refuses is still its 400, and once a place is free the transform is served."""
    file_id = image_id(picture((300, 200)))
    grey = image_id(grey_png(7000), "grey.png")
    with contextlib.ExitStack() as held:
        while True:
            try:
                held.enter_context(variants._DECODES.admitted())
            except Saturated:
                break
        busy = client.get(f"/storage/download/{file_id}?width=64&format=webp", headers=user.headers)
        assert busy.status_code == 503 and busy.headers["Retry-After"] == "2"
        assert busy.get_json()["name"] == "SERVICE_UNAVAILABLE"
        assert client.get(f"/storage/download/{grey}?format=webp", headers=user.headers).status_code == 400
    served = client.get(f"/storage/download/{file_id}?width=64&format=webp", headers=user.headers)
    assert served.status_code == 200 and opened(served).size == (64, 43)


def test_concurrent_callers_share_one_computation():
    flights = SingleFlight()
    calls, results = [], []
    started = threading.Event()

    def compute() -> bytes:
        calls.append(1)
        started.set()
        time.sleep(0.2)
        return b"result"

    def ask() -> None:
        results.append(flights.run("k", compute))

    threads = [threading.Thread(target=ask) for _ in range(10)]
    threads[0].start()
    started.wait(5)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert calls == [1] and results == [b"result"] * 10
    assert flights.run("k", lambda: b"again") == b"again"  # done: the next one computes anew

    def fail() -> bytes:
        raise ValueError("bad image")

    with pytest.raises(ValueError):
        flights.run("e", fail)
