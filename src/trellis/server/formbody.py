"""Form bodies (multipart and URL-encoded): werkzeug's parser, with its refusals told apart.

werkzeug raises the same ``RequestEntityTooLarge`` when the body passes the route's limit, when a
multipart form has more than ``MAX_FORM_PARTS`` parts (Flask: 1,000), and when one text field is larger
than ``MAX_FORM_MEMORY_SIZE`` (Flask: 500,000 bytes). A route that reads a file from the form (the
Storage upload) reports the first as its file being too large; the other two are
:class:`FormLimitExceeded`, a 413 whose message says which limit the form passed.

Checked against werkzeug 3.1.9 (see :mod:`trellis.server`): ``FormDataParser.parse``'s signature, and where
its refusals come from: too many parts from a function named ``next_event`` (``MultipartDecoder``), a text
field over the memory limit from elsewhere, and the body limit from reading the stream.
"""

from __future__ import annotations

from typing import IO, Any

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.formparser import FormDataParser

CHECKED = {"werkzeug": "3.1.9"}  # see trellis.server


class FormLimitExceeded(RequestEntityTooLarge):
    """A form over the number of parts or the size of a text field (not over the body limit)."""


class _WatchedStream:
    """The body as the form parser reads it; remembers whether a read passed the body limit."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self.over_limit = False

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except RequestEntityTooLarge:
            self.over_limit = True
            raise


def _raised_in(error: BaseException, function: str) -> bool:
    """Whether ``error`` was raised by a function of that name (werkzeug counts parts in ``next_event``)."""
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    return trace is not None and trace.tb_frame.f_code.co_name == function


class FormParser(FormDataParser):
    """``Request.form_data_parser_class`` of :class:`trellis.jsonbody.TrellisRequest`."""

    def parse(
        self, stream: IO[bytes], mimetype: str, content_length: int | None, options: dict[str, str] | None = None
    ) -> tuple[IO[bytes], Any, Any]:
        watched = _WatchedStream(stream)
        try:
            _, form, files = super().parse(watched, mimetype, content_length, options)  # type: ignore[arg-type]
        except RequestEntityTooLarge as error:
            if watched.over_limit:
                raise
            if _raised_in(error, "next_event"):
                message = f"The form has more than {self.max_form_parts} fields"
            else:
                message = f"A form field is larger than {self.max_form_memory_size} bytes"
            raise FormLimitExceeded(message) from None
        return stream, form, files
