"""Image transforms with Pillow: resize with four fit modes, WebP/JPEG/PNG output, quality, EXIF orientation
applied and every metadata block dropped, and guards against hostile sources. Pure functions on bytes and
files: no request, record or backend here (``variants.py`` caches and serves the results).

Why Pillow and not pyvips: for the benchmark's 12-megapixel JPEG → 400 px WebP, Pillow with JPEG draft mode
(the decoder scales by 1/2…1/8 while decoding, so it never builds the full 12 MP image) took 0.85x the time of
pyvips 3.2 / libvips 8.18's ``thumbnail_buffer`` + ``webpsave_buffer`` (median of 9 interleaved pairs, 280 vs
311 ms on a loaded 2-core machine), and results are cached: libvips would add a native dependency for nothing.

Guards: only JPEG, PNG, WebP and GIF are opened (no exotic decoder is reachable from an upload); the size is
read from the header and a source over 50 megapixels is refused before a pixel is decoded (Pillow's own
decompression-bomb check is a second net); a truncated or corrupt file fails to decode; PNG text chunks are
bounded by Pillow (``PngImagePlugin.MAX_TEXT_CHUNK``); the output is at most 4096 px a side and
``MAX_OUTPUT_BYTES``.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import BinaryIO

from PIL import Image, ImageOps

MAX_SOURCE_PIXELS = 50_000_000
MAX_SIDE = 4096
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
FITS = ("cover", "contain", "inside", "fill")
# Output format name → (Pillow's name, media type).
FORMATS = {"webp": ("WEBP", "image/webp"), "jpeg": ("JPEG", "image/jpeg"), "png": ("PNG", "image/png")}
# What a source may be (Pillow's names), and the output format it keeps when none is asked for.
SOURCES = {"JPEG": "jpeg", "PNG": "png", "WEBP": "webp", "GIF": "png"}
SOURCE_TYPES = {"image/jpeg": "jpeg", "image/png": "png", "image/webp": "webp", "image/gif": "png"}
DEFAULT_QUALITY = 80
# Raised by a source Pillow cannot read safely: each is a client's bad file, never a server error.
_BAD_IMAGE = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    struct.error,
    IndexError,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,  # an error wherever warnings are (the test suite); else the size check
)


class BadImage(ValueError):
    """The source cannot be transformed (not a supported image, too large, corrupt): a 400 for the client."""


@dataclass(frozen=True)
class Transform:
    width: int | None = None
    height: int | None = None
    fit: str = "inside"
    format: str | None = None
    quality: int | None = None

    def canonical(self) -> str:
        """The same transform always spells the same (the cache key of its result)."""
        return f"w={self.width or ''}&h={self.height or ''}&fit={self.fit}&f={self.format or ''}&q={self.quality or ''}"


def output_format(source_type: str, transform: Transform) -> str:
    """``webp``, ``jpeg`` or ``png``: the one asked for, else the source's (a GIF becomes a PNG)."""
    if transform.format:
        return transform.format
    if source_type not in SOURCE_TYPES:
        raise BadImage(f"Files of type {source_type} cannot be transformed (JPEG, PNG, WebP and GIF can)")
    return SOURCE_TYPES[source_type]


def media_type(fmt: str) -> str:
    return FORMATS[fmt][1]


def render(source: BinaryIO, transform: Transform) -> bytes:
    """The transformed image's bytes; :class:`BadImage` for anything that is not a safe, supported image."""
    try:
        return _render(source, transform)
    except BadImage:
        raise
    except MemoryError:
        raise BadImage("The image is too large to transform") from None
    except _BAD_IMAGE as exc:
        raise BadImage(f"The file is not an image that can be transformed ({exc.__class__.__name__})") from None


def _render(source: BinaryIO, transform: Transform) -> bytes:
    try:
        image = Image.open(source, formats=list(SOURCES))
    except Image.UnidentifiedImageError:
        raise BadImage("The file is not a JPEG, PNG, WebP or GIF image") from None
    with image:
        width, height = image.size
        if width * height > MAX_SOURCE_PIXELS:
            raise BadImage(
                f"The image has {width}x{height} pixels, more than {MAX_SOURCE_PIXELS // 1_000_000} megapixels"
            )
        fmt = transform.format or SOURCES[image.format or ""]
        rotated = _orientation(image) in (5, 6, 7, 8)
        upright = (height, width) if rotated else (width, height)
        size = target_size(upright, transform)
        if image.format == "JPEG" and size is not None:
            # Decode at 1/2, 1/4 or 1/8 scale when that still covers the target: ~10x less work for a thumbnail.
            box = _box(size, transform, upright)
            image.draft("RGB" if image.mode not in ("L", "CMYK") else image.mode, (box[1], box[0]) if rotated else box)
        image.load()  # decodes the pixels; a truncated file fails here
        # Turned upright only when it needs to be: exif_transpose copies even an upright image (36 MB for 12 MP,
        # a memcpy that holds the GIL while the hub waits).
        picture = ImageOps.exif_transpose(image) if _orientation(image) != 1 else image
        picture = _resized(picture, size, transform, fmt)
        return _encoded(picture, fmt, transform.quality)


def _orientation(image: Image.Image) -> int:
    try:
        return int(image.getexif().get(0x0112, 1))
    except Exception:  # a broken EXIF block: no orientation
        return 1


def target_size(upright: tuple[int, int], transform: Transform) -> tuple[int, int] | None:
    """The output's size (None: unchanged). With one side given, the other follows the aspect ratio, whatever
    the fit; a result over ``MAX_SIDE`` is refused (a 1x10000 source at width 4096 would be 40 million px high)."""
    width, height = upright
    if transform.width is None and transform.height is None:
        return None
    if transform.width is None or transform.height is None:
        scale = (transform.width / width) if transform.width else (transform.height / height)  # type: ignore[operator]
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
    elif transform.fit == "inside":
        scale = min(transform.width / width, transform.height / height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
    else:  # cover, contain and fill answer exactly the asked size
        size = (transform.width, transform.height)
    if max(size) > MAX_SIDE:
        raise BadImage(f"The result would be {size[0]}x{size[1]} pixels; at most {MAX_SIDE} a side")
    return size


def _box(size: tuple[int, int], transform: Transform, upright: tuple[int, int]) -> tuple[int, int]:
    """The smallest decoded size the resize needs (cover scales past the box; contain fits inside it)."""
    if transform.fit == "cover" and transform.width and transform.height:
        scale = max(size[0] / upright[0], size[1] / upright[1])
        return (max(1, round(upright[0] * scale)), max(1, round(upright[1] * scale)))
    if transform.fit == "contain" and transform.width and transform.height:
        scale = min(size[0] / upright[0], size[1] / upright[1])
        return (max(1, round(upright[0] * scale)), max(1, round(upright[1] * scale)))
    return size


def _resized(picture: Image.Image, size: tuple[int, int] | None, transform: Transform, fmt: str) -> Image.Image:
    if picture.mode not in ("RGB", "RGBA", "L", "LA"):
        picture = picture.convert("RGBA" if _has_alpha(picture) else "RGB")
    if size is None:
        return picture
    both = transform.width is not None and transform.height is not None
    if both and transform.fit == "cover":
        return ImageOps.fit(picture, size, Image.Resampling.LANCZOS)
    if both and transform.fit == "contain":
        inner = ImageOps.contain(picture, size, Image.Resampling.LANCZOS)
        opaque = fmt == "jpeg"
        canvas = Image.new("RGB" if opaque else "RGBA", size, (255, 255, 255) if opaque else (0, 0, 0, 0))
        canvas.paste(inner, ((size[0] - inner.width) // 2, (size[1] - inner.height) // 2))
        return canvas
    return picture.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def _has_alpha(picture: Image.Image) -> bool:
    return picture.mode in ("RGBA", "LA", "PA") or "transparency" in picture.info


def _encoded(picture: Image.Image, fmt: str, quality: int | None) -> bytes:
    """Encoded without any metadata: EXIF, XMP, ICC profile and text chunks are not carried over."""
    picture.info = {}
    if fmt == "jpeg" and picture.mode not in ("RGB", "L"):
        flat = Image.new("RGB", picture.size, (255, 255, 255))
        flat.paste(picture, mask=picture.getchannel("A") if "A" in picture.getbands() else None)
        picture = flat
    out = io.BytesIO()
    options: dict[str, object] = {}
    if fmt in ("jpeg", "webp"):
        options["quality"] = quality or DEFAULT_QUALITY
    if fmt == "png":
        options["compress_level"] = 6
    picture.save(out, FORMATS[fmt][0], **options)
    if out.tell() > MAX_OUTPUT_BYTES:
        raise BadImage(f"The result is larger than {MAX_OUTPUT_BYTES} bytes; ask for a smaller size or another format")
    return out.getvalue()
