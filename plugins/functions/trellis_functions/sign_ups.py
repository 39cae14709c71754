"""Sign-up triggers, run through the Authentication module's hooks (it never imports this module)."""

from __future__ import annotations

from typing import Any

from trellis import db
from trellis.credentials import UserIdentity
from trellis.hooks import hookimpl

from .jobs import queue_run
from .running import Ctx, invoke
from .state import registry


class SignUpTriggers:
    @hookimpl
    def trellis_user_signing_up(self, user: dict[str, Any]) -> None:
        found = registry().triggers_of("*", "before_sign_up")
        if not found:
            return
        db.session.connection()  # what they write joins the sign-up's transaction
        ctx = Ctx(None)  # nobody is signed in yet
        for trigger in found:
            invoke(trigger.function, trigger.name, trigger.event, (dict(user),), ctx, logged=False)

    @hookimpl
    def trellis_user_signed_up(self, user: dict[str, Any]) -> None:
        found = registry().triggers_of("*", "after_sign_up")
        if found:
            identity = UserIdentity("user", user["_id"], user={"_id": user["_id"], "email": user["email"]})
            queue_run(found, {"document": user}, identity)
