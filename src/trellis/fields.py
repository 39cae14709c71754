"""Marshmallow fields for request bodies: lists with a bound checked before their elements, strict booleans.

Every list a client sends is a ``BoundedList``: a million-element array is refused on its length at once,
instead of being validated element by element (seconds of CPU in a cooperative server, and one error per
element). The bound is a ``Length`` validator too, so the OpenAPI document says ``maxItems``.
"""

from __future__ import annotations

from typing import Any

from marshmallow import fields, validate

# The default bound of a list in a request body: large enough for any batch route (they cap at 1000).
MAX_ITEMS = 1000


class BoundedList(fields.List):
    """``fields.List`` with at most ``max_items`` (and at least ``min_items``) elements, checked first."""

    def __init__(
        self,
        cls_or_instance: fields.Field | type[fields.Field],
        *,
        max_items: int = MAX_ITEMS,
        min_items: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(cls_or_instance, **kwargs)
        self.length = validate.Length(min=min_items, max=max_items)
        # Also a validator: apispec documents it as minItems/maxItems.
        self.validators.insert(0, self.length)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[Any]:
        if isinstance(value, list):
            self.length(value)
        return super()._deserialize(value, attr, data, **kwargs)


class JsonBoolean(fields.Boolean):
    """A JSON ``true`` or ``false`` only: ``"true"``, ``1`` or ``"yes"`` in a body is a 400 (query strings,
    which are text, keep ``fields.Boolean``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value
