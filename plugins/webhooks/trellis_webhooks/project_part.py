"""The module's share of project as code: ``modules.webhooks.webhooks.<url>``, each webhook as
``GET /admin/webhooks/{id}`` shows it, ``{events, secret, active, description}`` (no id, timestamps or
delivery log: deliveries are data, not the project).

The key. A webhook has no name, and its description is optional free text; what an administrator knows a
webhook by is where it sends, so a webhook's key is its URL (``"https://crm.example.com/hooks"``). The
event list is not part of the key: it is what one changes on a webhook, and a change of it is an update
in a plan, not a delete and a create that would drop the secret and the delivery log. A URL is not unique,
though (two webhooks may send different events to one receiver): the second and later webhooks of one URL,
by creation, are ``"<url> (2)"``, ``"<url> (3)"`` … (a URL holds no space, so such a key is never a URL).
A project names a URL's webhooks without gaps (``"<url> (2)"`` only beside ``"<url>"``), so that what it
creates is keyed back the same way. A changed URL is a new webhook: the old one goes with ``prune``.

The secret signs every delivery; it is never exported (``"********"``) and a plan's detail shows it masked
on both sides. A project that gives ``"********"`` or no secret keeps the stored one; a webhook it creates
so gets a generated secret, as ``POST /admin/webhooks`` does when none is given. A new secret in a
project replaces the stored one.
"""

from __future__ import annotations

import re
from typing import Any

from marshmallow import ValidationError
from sqlalchemy import select

from trellis import db
from trellis.project import Change, ProjectInvalid, ProjectPart, invalid
from trellis.project.diff import differences
from trellis.redact import drop_masked, redact, secret_paths

from . import service
from .models import Webhook
from .schemas import WebhookCreateSchema

FIELDS = ("events", "secret", "active", "description")
SECRETS = frozenset(secret_paths(WebhookCreateSchema))
_NUMBERED = re.compile(r"^(?P<url>\S+) \((?P<number>[1-9][0-9]*)\)$")


def _split(key: str) -> tuple[str, int]:
    """The URL a key names and which of that URL's webhooks (1: the first created). A key that is not of
    the numbered form is all URL (and fails the URL's checks if it is none)."""
    found = _NUMBERED.match(key)
    if found is None or int(found["number"]) < 2:
        return key, 1
    return found["url"], int(found["number"])


def _key(url: str, number: int) -> str:
    return url if number == 1 else f"{url} ({number})"


def _rows() -> dict[str, Webhook]:
    """Every webhook by key: each URL's webhooks numbered in the order they were created."""
    rows = db.session.execute(select(Webhook).order_by(Webhook.created_at, Webhook.id)).scalars()
    keyed: dict[str, Webhook] = {}
    seen: dict[str, int] = {}
    for row in rows:
        seen[row.url] = seen.get(row.url, 0) + 1
        keyed[_key(row.url, seen[row.url])] = row
    return keyed


def _row(key: str) -> Webhook | None:
    url, number = _split(key)
    rows = db.session.execute(select(Webhook).where(Webhook.url == url).order_by(Webhook.created_at, Webhook.id))
    found = rows.scalars().all()
    return found[number - 1] if number <= len(found) else None


def _thing(row: Webhook) -> dict[str, Any]:
    shown = service.webhook_dict(row, show_secret=True)
    return {field: shown[field] for field in FIELDS}


class WebhooksPart(ProjectPart):
    module = "webhooks"
    kinds = {"webhooks": "webhook"}

    def stored(self, key: str) -> dict[str, Any]:
        """With the secrets themselves, to compare; :meth:`export` masks them."""
        return {name: _thing(row) for name, row in sorted(_rows().items())}

    def export(self, key: str) -> dict[str, Any]:
        return {name: redact(thing, WebhookCreateSchema) for name, thing in self.stored(key).items()}

    def normalise(self, key: str, name: str, thing: Any, path: str) -> Any:
        """Checked as ``POST /admin/webhooks`` checks a body (the URL is the key's), defaults filled as it
        fills them (``active``: true, ``description``: null); a masked or missing secret is the stored one
        (None for a webhook to create: the service generates it)."""
        if not isinstance(thing, dict):
            raise ProjectInvalid(path, "must be an object with events")
        if "url" in thing:
            raise ProjectInvalid(f"{path}.url", "a webhook's URL is its key in the project")
        url, _number = _split(name)
        try:
            loaded = WebhookCreateSchema().load({**drop_masked(thing, WebhookCreateSchema), "url": url})
        except ValidationError as exc:
            raise invalid(path, exc) from None
        secret = loaded.get("secret")
        if secret is None:
            row = _row(name)
            secret = row.secret if row is not None else None
        return {
            "events": loaded["events"],
            "secret": secret,
            "active": loaded["active"],
            "description": loaded.get("description"),
        }

    def check_project(self, section: dict[str, dict[str, Any]], path: str) -> None:
        """A URL's numbered keys follow its plain one without a gap: ``"<url> (3)"`` needs ``(2)`` and ``<url>``."""
        for key, things in section.items():
            for name in things:
                url, number = _split(name)
                if number > 1 and _key(url, number - 1) not in things:
                    raise ProjectInvalid(
                        f"{path}.{key}.{name}",
                        f"a URL's webhooks are keyed {url!r}, {_key(url, 2)!r} … without a gap: "
                        f"{_key(url, number - 1)!r} is missing",
                    )

    def describe(self, key: str, current: Any, wanted: Any) -> list[dict[str, Any]]:
        return differences(current, wanted, secrets=SECRETS)

    def order(self, changes: list[Change]) -> list[Change]:
        """Creates and updates, then deletes; a URL's creates in number order (so that they are numbered back
        as they were named), its deletes from the last (so that the numbers of those left do not move)."""

        def rank(change: Change) -> tuple[int, str, int]:
            url, number = _split(change.name)
            if change.action == "delete":
                return 1, url, -number
            return 0, url, number

        return sorted(changes, key=rank)

    def create(self, key: str, name: str, thing: Any) -> None:
        url, _number = _split(name)
        body = {"url": url, **thing}
        if body["secret"] is None:
            del body["secret"]  # generated, as POST does
        service.create_webhook(body)

    def update(self, key: str, name: str, thing: Any, current: Any) -> None:
        changed = {field: value for field, value in thing.items() if current.get(field) != value}
        service.update_webhook(_existing(name).id, changed)

    def delete(self, key: str, name: str, current: Any) -> None:
        service.delete_webhook(_existing(name).id)


def _existing(name: str) -> Webhook:
    row = _row(name)
    if row is None:  # planned in this transaction: it is there
        raise LookupError(f"no webhook keyed {name!r}")
    return row
