"""Mailgun over its HTTP API (v3): messages and domain templates, HTTP Basic auth ``api:<apiKey>``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from ._http import call, json_of, same_origin, text_or_none
from .base import Outgoing, ProviderFailure, RemoteTemplate

LABEL = "Mailgun"
# The version Trellis writes; re-uploads update it in place (Mailgun keeps at most 10 versions per template).
VERSION_TAG = "trellis"
MAX_PAGES = 100


def template_name(name: str) -> str:
    """Mailgun template names are lower case letters, digits and ``.-_~``."""
    return re.sub(r"[^a-z0-9._~-]+", "-", name.lower()).strip("-") or "template"


class Mailgun:
    name = "mailgun"

    def __init__(self, config: dict[str, Any]) -> None:
        self.base = config["baseUrl"].rstrip("/")
        self.domain: str = config["domain"]
        self.auth = ("api", config["apiKey"])
        self.timeout: float = config["timeout"]

    def _url(self, *parts: str) -> str:
        return "/".join([self.base, quote(self.domain, safe=""), *(quote(p, safe="") for p in parts)])

    def _call(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        return json_of(LABEL, call(LABEL, method, url, self.timeout, auth=self.auth, **kwargs))

    def send(self, message: Outgoing) -> str | None:
        data = {
            "from": str(message.sender),
            "to": str(message.to),
            "subject": message.subject,
            "text": message.text,
            "html": message.html,
        }
        answer = self._call("POST", self._url("messages"), data=data)
        return text_or_none(answer.get("id"))

    def upload_template(self, name: str, subject: str, body: str, external_id: str | None) -> str:
        version = {"template": body, "headers": json.dumps({"Subject": subject}), "active": "yes"}
        if external_id:
            try:
                self._call("PUT", self._url("templates", external_id, "versions", VERSION_TAG), data=version)
                return external_id
            except ProviderFailure as exc:
                if exc.status != 404:
                    raise
            try:  # the template exists but our version was deleted there
                self._call(
                    "POST", self._url("templates", external_id, "versions"), data={**version, "tag": VERSION_TAG}
                )
                return external_id
            except ProviderFailure as exc:
                if exc.status != 404:
                    raise
        created = self._call(
            "POST",
            self._url("templates"),
            data={
                "name": template_name(name),
                "description": f"Trellis template {name}"[:200],
                "template": body,
                "tag": VERSION_TAG,
                "headers": version["headers"],
            },
        )
        template = created.get("template")
        created_name = text_or_none(template.get("name")) if isinstance(template, dict) else None
        if not created_name:
            raise ProviderFailure("Mailgun's answer to creating a template has no template name")
        return created_name

    def list_templates(self) -> Iterator[RemoteTemplate]:
        url: str | None = self._url("templates")
        params: dict[str, Any] | None = {"limit": 100}
        seen: set[str] = set()
        for _page in range(MAX_PAGES):
            if url is None:
                return
            page = self._call("GET", url, params=params)
            items = [
                item for item in _list(page.get("items")) if isinstance(item, dict) and text_or_none(item.get("name"))
            ]
            fresh = [item for item in items if item["name"] not in seen]
            if not fresh:
                return
            for item in fresh:
                seen.add(item["name"])
                yield self._fetch(item["name"])
            paging = page.get("paging")
            following = paging.get("next") if isinstance(paging, dict) else None
            url = following if isinstance(following, str) and same_origin(self.base, following) else None
            params = None  # the paging link carries its own query

    def _fetch(self, name: str) -> RemoteTemplate:
        answer = self._call("GET", self._url("templates", name), params={"active": "yes"})
        template = _object(answer.get("template"))
        version = _object(template.get("version"))
        headers = version.get("headers") or {}
        if isinstance(headers, str):  # stored as a JSON string; some answers echo it back that way
            try:
                headers = json.loads(headers)
            except ValueError:
                headers = {}
        subject = headers.get("Subject") if isinstance(headers, dict) else None
        return RemoteTemplate(
            external_id=name,
            name=name,
            subject=text_or_none(subject) or name,
            body=text_or_none(version.get("template")),
        )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
