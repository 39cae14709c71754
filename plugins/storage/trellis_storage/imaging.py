"""Image transforms with Pillow: resize with four fit modes, WebP/JPEG/PNG output, quality, EXIF orientation
applied and every metadata block dropped, and guards against hostile sources. Pure functions on bytes and
files: no request, record or backend here (``variants.py`` caches and serves the results).

Why Pillow and not pyvips: for the benchmark's 12-megapixel JPEG → 400 px WebP, Pillow with JPEG draft mode
(the decoder scales by 1/2…1/8 while decoding, so it never builds the full 12 MP image) was a little faster
than pyvips / libvips's ``thumbnail_buffer`` + ``webpsave_buffer`` (``bench/results/modules.md#pillow``), and
results are cached: libvips would add a native dependency for nothing.

Guards: only JPEG, PNG, WebP and GIF are opened (no exotic decoder is reachable from an upload). Everything the
header decides is decided by :func:`inspect` before a pixel is decoded: a source over 50 megapixels, a result
over 4096 px a side (without a size the result is the source's size), and a decode whose memory (the decoded
pixels, after JPEG draft reduction, plus the copies the transform makes) would pass ``MAX_DECODE_BYTES``.
Pillow's own decompression-bomb check is a second net; a truncated or corrupt file fails to decode; PNG text
chunks are bounded by Pillow (``PngImagePlugin.MAX_TEXT_CHUNK``); the output is at most ``MAX_OUTPUT_BYTES``.
After a render the C heap's freed pages go back to the system (:func:`release_memory`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, TypeVar

from PIL import Image, ImageOps

T = TypeVar("T")

MAX_SOURCE_PIXELS = 50_000_000
MAX_SIDE = 4096
MAX_OUTPUT_BYTES = 16 * 1024 * 1024
# The memory one transform may need, estimated from the header: a 50 MP RGB source (Pillow keeps 4 bytes a pixel)
# fits, with its output; the same needing a mode conversion or a rotation as well does not.
MAX_DECODE_BYTES = 256 * 1024 * 1024
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


@dataclass(frozen=True)
class Plan:
    """What the header says about one transform of one source, decided before decoding."""

    size: tuple[int, int] | None  # the output's size; None: the source's (upright)
    memory: int  # the estimated peak bytes of decoding and transforming
    orientation: int  # EXIF orientation as the header tells it


def inspect(source: BinaryIO, transform: Transform) -> Plan:
    """Everything the header alone decides (reading no pixel): :class:`BadImage` for a source or result too large,
    or a decode needing more than ``MAX_DECODE_BYTES``."""
    return _guarded(_inspect, source, transform)


def render(source: BinaryIO, transform: Transform) -> bytes:
    """The transformed image's bytes; :class:`BadImage` for anything that is not a safe, supported image (every
    check of :func:`inspect` included)."""
    return _guarded(_render, source, transform)


def _guarded(work: Callable[[BinaryIO, Transform], T], source: BinaryIO, transform: Transform) -> T:
    try:
        return work(source, transform)
    except BadImage:
        raise
    except MemoryError:
        raise BadImage("The image is too large to transform") from None
    except _BAD_IMAGE as exc:
        raise BadImage(f"The file is not an image that can be transformed ({exc.__class__.__name__})") from None


def _opened(source: BinaryIO) -> Image.Image:
    try:
        return Image.open(source, formats=list(SOURCES))
    except Image.UnidentifiedImageError:
        raise BadImage("The file is not a JPEG, PNG, WebP or GIF image") from None


def _inspect(source: BinaryIO, transform: Transform) -> Plan:
    with _opened(source) as image:
        return _planned(image, transform)


def _planned(image: Image.Image, transform: Transform) -> Plan:
    """Checks the header and sets up reduction on load (JPEG draft), on ``image`` not yet loaded."""
    width, height = image.size
    if width * height > MAX_SOURCE_PIXELS:
        raise BadImage(f"The image has {width}x{height} pixels, more than {MAX_SOURCE_PIXELS // 1_000_000} megapixels")
    orientation = _orientation(image) if _exif_in_header(image) else 1
    rotated = orientation in (5, 6, 7, 8)
    upright = (height, width) if rotated else (width, height)
    size = target_size(upright, transform)
    if max(size or upright) > MAX_SIDE:
        shown = size or upright
        raise BadImage(
            f"The result would be {shown[0]}x{shown[1]} pixels; at most {MAX_SIDE} a side (ask for a width or height)"
        )
    if image.format == "JPEG" and size is not None:
        # Decode at 1/2, 1/4 or 1/8 scale when that still covers the target: ~10x less work for a thumbnail.
        box = _box(size, transform, upright)
        image.draft("RGB" if image.mode not in ("L", "CMYK") else image.mode, (box[1], box[0]) if rotated else box)
    memory = _memory(image, size or upright, orientation != 1)
    if memory > MAX_DECODE_BYTES:
        raise BadImage(
            f"Transforming this {width}x{height} image would need about {memory // 2**20} MiB, more than "
            f"{MAX_DECODE_BYTES // 2**20} MiB"
        )
    return Plan(size, memory, orientation)


def _exif_in_header(image: Image.Image) -> bool:
    """Whether the orientation can be read without decoding: Pillow's PNG ``getexif`` decodes the whole image to
    look for an eXIf chunk after the pixels, unless one came before them."""
    return image.format != "PNG" or "exif" in image.info


def _memory(image: Image.Image, out: tuple[int, int], turned: bool) -> int:
    """The peak bytes of a transform, estimated from the (drafted) header: the decoded pixels, a converted copy
    when the mode is not one we encode, a rotated copy, and the output with the encoder's copy of it."""
    pixels = image.size[0] * image.size[1]
    decoded = pixels * _bytes_per_pixel(image.mode)
    converted = pixels * 4 if image.mode not in ("RGB", "RGBA", "L", "LA") else 0
    rotated = pixels * 4 if turned else 0
    return decoded + converted + rotated + 2 * out[0] * out[1] * 4


def _bytes_per_pixel(mode: str) -> int:
    """How Pillow holds a pixel in memory: one byte for 1, L and P, two for 16-bit grey, else four."""
    if mode in ("1", "L", "P"):
        return 1
    return 2 if mode.startswith("I;16") else 4


def _render(source: BinaryIO, transform: Transform) -> bytes:
    with _opened(source) as image:
        plan = _planned(image, transform)
        fmt = transform.format or SOURCES[image.format or ""]
        image.load()  # decodes the pixels; a truncated file fails here
        size, orientation = plan.size, _orientation(image)
        if orientation != plan.orientation and size is not None:  # a PNG's eXIf chunk after its pixels
            width, height = image.size
            size = target_size((height, width) if orientation in (5, 6, 7, 8) else (width, height), transform)
        # Turned upright only when it needs to be: exif_transpose copies even an upright image (36 MB for 12 MP,
        # a memcpy that holds the GIL while the hub waits).
        picture = ImageOps.exif_transpose(image) if orientation != 1 else image
        picture = _resized(picture, size, transform, fmt)
        return _encoded(picture, fmt, transform.quality)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def release_memory() -> None:
    """Give the C heap's free pages back to the system (glibc). Pillow's image blocks are freed into the heap of
    the pool thread that decoded them, which otherwise keeps them: RSS would only grow, burst after burst."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


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
