"""The document triggers the Database module's write path calls (``trellis.triggers``).

Before-triggers run in the write's transaction, in file-name then definition order, each given the document
as it will be stored (and an update's ``previous``); a dict answered replaces it. After-triggers are queued
in the same transaction (:mod:`.jobs`), so they run once the write commits, and never for one that did not.
"""

from __future__ import annotations

import copy
from typing import Any

from trellis import db

from .api import Trigger
from .callers import acting_identity
from .jobs import queue_run
from .running import Ctx, FunctionError, invoke
from .state import registry


class DocumentTriggers:
    def watches(self, schema: str, kind: str) -> bool:
        return registry().watches(schema, kind)

    def before(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
        found = registry().triggers_of(schema, f"before_{kind}")
        if not found:
            return doc
        db.session.connection()  # the write's transaction, begun now if need be: what they write joins it
        ctx = Ctx(acting_identity())
        for trigger in found:
            args = (doc, copy.deepcopy(previous)) if kind == "update" else (doc,)
            answer = invoke(trigger.function, trigger.name, trigger.event, args, ctx, logged=False)
            if isinstance(answer, dict):
                doc = answer
            elif answer is not None:
                raise FunctionError(
                    trigger.name, f"a before-trigger answers a dict or None, not {type(answer).__name__}"
                )
        return doc

    def after(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> None:
        found: list[Trigger] = registry().triggers_of(schema, f"after_{kind}")
        if found:
            queue_run(found, {"doc": doc, "previous": previous}, acting_identity())
