"""SendGrid over its v3 HTTP API: mail/send and dynamic transactional templates, Bearer API key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import requests

from ..addresses import Address
from ._http import call, json_of, same_origin, text_or_none
from .base import Outgoing, ProviderFailure, RemoteTemplate

LABEL = "SendGrid"
VERSION_NAME = "trellis"
MAX_PAGES = 100


def _party(address: Address) -> dict[str, str]:
    return {"email": address.email, "name": address.name} if address.name else {"email": address.email}


class SendGrid:
    name = "sendgrid"

    def __init__(self, config: dict[str, Any]) -> None:
        self.base = config["baseUrl"].rstrip("/")
        self.headers = {"Authorization": f"Bearer {config['apiKey']}"}
        self.timeout: float = config["timeout"]

    def _url(self, *parts: str) -> str:
        return "/".join([self.base, *(quote(p, safe="") for p in parts)])

    def _call(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        return call(LABEL, method, url, self.timeout, headers=self.headers, **kwargs)

    def send(self, message: Outgoing) -> str | None:
        payload = {
            "personalizations": [{"to": [_party(message.to)]}],
            "from": _party(message.sender),
            "subject": message.subject,
            # SendGrid wants text/plain before text/html.
            "content": [
                {"type": "text/plain", "value": message.text or " "},
                {"type": "text/html", "value": message.html},
            ],
        }
        response = self._call("POST", self._url("mail", "send"), json=payload)
        return response.headers.get("X-Message-Id")

    def upload_template(self, name: str, subject: str, body: str, external_id: str | None) -> str:
        version = {"name": VERSION_NAME, "subject": subject, "html_content": body, "active": 1}
        if external_id:
            try:
                template = json_of(LABEL, self._call("GET", self._url("templates", external_id)))
            except ProviderFailure as exc:
                if exc.status != 404:
                    raise
            else:
                if template.get("name") != name[:100]:
                    self._call("PATCH", self._url("templates", external_id), json={"name": name[:100]})
                active = _active_version(template)
                if active is not None and text_or_none(active.get("id")):
                    self._call("PATCH", self._url("templates", external_id, "versions", active["id"]), json=version)
                else:
                    self._call("POST", self._url("templates", external_id, "versions"), json=version)
                return external_id
        created = json_of(
            LABEL, self._call("POST", self._url("templates"), json={"name": name[:100], "generation": "dynamic"})
        )
        template_id = text_or_none(created.get("id"))
        if not template_id:
            raise ProviderFailure("SendGrid's answer to creating a template has no id")
        self._call("POST", self._url("templates", template_id, "versions"), json=version)
        return template_id

    def list_templates(self) -> Iterator[RemoteTemplate]:
        url: str | None = self._url("templates")
        params: dict[str, Any] | None = {"generations": "dynamic", "page_size": 200}
        seen: set[str] = set()
        for _page in range(MAX_PAGES):
            if url is None:
                return
            page = json_of(LABEL, self._call("GET", url, params=params))
            result = page.get("result")
            items = (
                [t for t in result if isinstance(t, dict) and text_or_none(t.get("id"))]
                if isinstance(result, list)
                else []
            )
            fresh = [t for t in items if t["id"] not in seen]
            if not fresh:
                return
            for item in fresh:
                seen.add(item["id"])
                yield self._fetch(item["id"])
            metadata = page.get("_metadata")
            following = metadata.get("next") if isinstance(metadata, dict) else None
            url = following if isinstance(following, str) and same_origin(self.base, following) else None
            params = None

    def _fetch(self, template_id: str) -> RemoteTemplate:
        template = json_of(LABEL, self._call("GET", self._url("templates", template_id)))
        active = _active_version(template) or {}
        name = text_or_none(template.get("name")) or template_id
        return RemoteTemplate(
            external_id=template_id,
            name=name,
            subject=text_or_none(active.get("subject")) or name,
            body=text_or_none(active.get("html_content")),
        )


def _active_version(template: dict[str, Any]) -> dict[str, Any] | None:
    versions = template.get("versions")
    if not isinstance(versions, list):
        return None
    return next((v for v in versions if isinstance(v, dict) and v.get("active") == 1), None)
