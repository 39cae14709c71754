"""The document triggers the Database module's write path calls (``trellis.triggers``).

Before-triggers run before the write, in file-name then definition order, each given the document as it
will be stored (and an update's ``previous``); a dict answered replaces it. What they write through
``ctx.db`` opens the session's transaction, which the write then joins (:mod:`.database`); one that writes
nothing leaves the write its single statement. After-triggers are queued with the write (:mod:`.jobs`), so
they run once it commits, and never for one that did not.
"""

from __future__ import annotations

import copy
from typing import Any

from .api import Trigger
from .callers import acting_identity
from .jobs import StatementRuns, queue_run
from .running import Ctx, FunctionError, invoke
from .state import registry


class DocumentTriggers:
    def watches(self, schema: str, kind: str) -> bool:
        return registry().watches(schema, kind)

    def runs_before(self, schema: str, kind: str) -> bool:
        return bool(registry().triggers_of(schema, f"before_{kind}"))

    def before(self, schema: str, kind: str, doc: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
        found = registry().triggers_of(schema, f"before_{kind}")
        if not found:
            return doc
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
            queue_run(found, {"document": doc, "previous": previous}, acting_identity())

    def queue(self, schema: str, kind: str) -> StatementRuns | None:
        found: list[Trigger] = registry().triggers_of(schema, f"after_{kind}")
        return StatementRuns(found, acting_identity()) if found else None
