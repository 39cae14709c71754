"""What a live subscription asks for, checked before it is made: the schema (readable by the caller), its
filter (the list's own conditions, compiled once per distinct filter), the kinds of change, and ``since``
(an eventId the log can still replay from). Shared by the Socket.IO subscription and the SSE stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from trellis import db, events
from trellis.access import Acting
from trellis.credentials import Identity
from trellis.errors import APIError, bad_request, not_found

from . import live_access
from . import search as full_text
from .crud_gate import allowed
from .query import Compiler, parse_where
from .registry import snapshot_having

KINDS = frozenset({"create", "update", "delete", "enter", "leave"})


def resync_required(since: int) -> APIError:
    return APIError(
        410,
        f"The event log no longer holds every event after {since}; read the documents again, then subscribe "
        "without since (or with the eventId of the first change received)",
        name="RESYNC_REQUIRED",
    )


def parse_since(raw: Any, key: str = "since") -> int | None:
    """``since``: an eventId (a non-negative integer, or its decimal text)."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.strip().isdigit() and len(raw.strip()) <= 18:
        return int(raw.strip())
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 2**63:
        return raw
    raise bad_request("since must be an eventId (a non-negative integer)", {key: ["Not an eventId"]})


def parse_kinds(raw: Any) -> frozenset[str]:
    if raw is None:
        return KINDS
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, list) or not raw or not all(isinstance(kind, str) and kind in KINDS for kind in raw):
        raise bad_request(
            "events lists some of create, update, delete, enter, leave", {"events": [", ".join(sorted(KINDS))]}
        )
    return frozenset(raw)


def readable_schema(name: Any, identity: Identity | None) -> Any:
    """The schema a caller may list (the REST list's rules: 404 when reading is disabled, 401 when it
    needs a user and there is none)."""
    if not isinstance(name, str) or not name:
        raise bad_request("schema must be a schema name", {"schema": ["Missing or not a string"]})
    snap = snapshot_having(lambda s: s.document_schema(name) is not None)
    schema = snap.document_schema(name)
    if schema is None or schema.table is None:
        raise not_found(f"No schema named {name!r} with documents")
    error = allowed(schema, "read", identity)
    if error is not None:
        raise error
    return schema


def compile_filter(
    schema: Any, condition: Any, describe: Callable[[], str], search: Any = None
) -> tuple[Callable[[dict[str, Any]], bool] | None, str]:
    """The predicate of a condition tree and full-text ``search`` words (None when there is neither) and
    the key under which subscriptions with the same filter share its evaluation (``describe()``: the
    filter in a canonical form, "" for none; called once the filter is known to be valid). A document
    matches the words exactly when the list would find it (:func:`.search.matcher`)."""
    predicate = Compiler(schema, "python").predicate(condition)  # 400 for what the list would refuse
    text = describe()
    if search is not None:
        words = full_text.matcher(schema, full_text.check_text(search), db.engine().dialect.name)
        where = predicate if text else None
        text += "\nsearch:" + search
        predicate = words if where is None else (lambda doc: where(doc) and words(doc))
        return predicate, f"{schema.name}\n{text}"
    return (predicate if text else None), f"{schema.name}\n{text}"


def where_filter(schema: Any, where: Any, search: Any = None) -> tuple[Callable[[dict[str, Any]], bool] | None, str]:
    """A subscription's JSON ``where`` (the REST operators) and ``search`` words."""
    return compile_filter(
        schema,
        parse_where(where),
        lambda: json.dumps(where, sort_keys=True, separators=(",", ":")) if where else "",
        search,
    )


def replayed_families(schema_name: str, viewer: Acting | None) -> tuple[str, ...]:
    """The event families a replay reads: the schema's documents and, for a subscriber under access
    control, the grants and revokes that change who may read them (on the schema and on the schemas it
    inherits a permission from), so a grant made while the client was away replays as ``enter``."""
    own = f"database.{schema_name}"
    if viewer is None:
        return (own,)
    return (own, *live_access.access_families(schema_name), live_access.TEAM_FAMILY)


def check_replayable(since: int, families: tuple[str, ...]) -> None:
    """410 RESYNC_REQUIRED when events of the families after ``since`` may have been pruned; 400 when
    ``since`` is ahead of the log."""
    if since > events.latest():
        raise bad_request("since is ahead of the event log", {"since": ["No such eventId yet"]})
    if not all(events.complete_after(since, family) for family in families):
        raise resync_required(since)
